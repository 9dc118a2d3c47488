-- The time of a merchant's last decision under its lock, as recorded: a
-- process whose clock reads earlier records its own decisions at that time
-- instead, so that admissions never run backwards (domain.DecisionTime).

-- +goose Up
ALTER TABLE merchants ADD COLUMN decided_at timestamptz;
GRANT SELECT (decided_at) ON merchants TO orderd_auditor;

-- +goose Down
ALTER TABLE merchants DROP COLUMN decided_at;
