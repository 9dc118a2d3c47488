package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ChainQuery is the auditor's query over the chains (docs/tamper-evidence.md
// prints it): every event whose hash is not sha256 of the previous event's
// hash and its own content, or whose version does not follow the previous
// one. An empty answer means every stream's chain recomputes: each link is
// checked against the stored hash before it, so by induction from version 1
// every stored hash is the recomputed one. It uses only PostgreSQL's built-in
// functions, so an auditor runs it as it is, with the read-only role.
const ChainQuery = `SELECT stream_id, version FROM (
    SELECT stream_id, version, hash,
        sha256(coalesce(lag(hash) OVER w, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea) ||
            convert_to(stream_id::text || E'\n' || version::text || E'\n' || type || E'\n' ||
                data::text || E'\n' || coalesce(metadata::text, '') || E'\n' ||
                (extract(epoch from recorded_at) * 1000000)::bigint::text, 'UTF8')) AS recomputed,
        coalesce(lag(version) OVER w, 0) AS previous
    FROM events
    WINDOW w AS (PARTITION BY stream_id ORDER BY version)
) links
WHERE hash IS DISTINCT FROM recomputed OR version <> previous + 1
ORDER BY stream_id, version`

// BrokenLink is the first event of a stream whose chain does not recompute.
type BrokenLink struct {
	StreamID uuid.UUID
	Version  int
}

// BrokenChains runs ChainQuery and returns, for every stream whose chain is
// broken, the first event where it breaks.
func (s *Store) BrokenChains(ctx context.Context) ([]BrokenLink, error) {
	rows, err := s.pool.Query(ctx, ChainQuery)
	if err != nil {
		return nil, mapErr(fmt.Errorf("recompute chains: %w", err))
	}
	links, err := pgx.CollectRows(rows, pgx.RowToStructByPos[BrokenLink])
	if err != nil {
		return nil, mapErr(fmt.Errorf("recompute chains: %w", err))
	}
	var out []BrokenLink
	for _, l := range links {
		if len(out) == 0 || out[len(out)-1].StreamID != l.StreamID {
			out = append(out, l)
		}
	}
	return out, nil
}
