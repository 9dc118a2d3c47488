-- Audits of the engine's clocks and of direct admissions.
--
-- +goose Up

-- +goose Down
