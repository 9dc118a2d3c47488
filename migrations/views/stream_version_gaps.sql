-- A stream is whole when each version is the one before plus one: a gap
-- shows as a jump, a duplicate (were the unique constraint ever lost) as a
-- repeat. One row per broken step.
CREATE VIEW audit.stream_version_gaps AS
SELECT s.stream_id, s.stream_type, s.version, s.previous_version
FROM (SELECT stream_id, stream_type, version,
             lag(version, 1, 0) OVER (PARTITION BY merchant_id, stream_id ORDER BY version) AS previous_version
      FROM events) s
WHERE s.version <> s.previous_version + 1;
