package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
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
            ` + eventContent + `) AS recomputed,
        coalesce(lag(version) OVER w, 0) AS previous
    FROM events
    WINDOW w AS (PARTITION BY stream_id ORDER BY version)
) links
WHERE hash IS DISTINCT FROM recomputed OR version <> previous + 1
ORDER BY stream_id, version`

// eventContent is the text an event's hash covers, computed from its row
// (verify.EventContent in Go).
const eventContent = `convert_to(stream_id::text || E'\n' || version::text || E'\n' || type || E'\n' ||
                data::text || E'\n' || coalesce(metadata::text, '') || E'\n' ||
                (extract(epoch from recorded_at) * 1000000)::bigint::text, 'UTF8')`

// BrokenLink is the first event of a stream whose chain does not recompute.
type BrokenLink struct {
	StreamID uuid.UUID
	Version  int
}

// chainParts is how many parts of the stream ids BrokenChains recomputes
// at once, each on a connection of its own: the recomputation is CPU on
// one backend per query, hashing and printing every event.
const chainParts = 4

// BrokenChains runs ChainQuery and returns, for every stream whose chain is
// broken, the first event where it breaks. It runs the query over
// chainParts ranges of stream ids at once: a chain is one stream's, so the
// ranges' answers together are the whole query's.
func (s *Store) BrokenChains(ctx context.Context) ([]BrokenLink, error) {
	parts := make([][]BrokenLink, chainParts)
	g, gctx := errgroup.WithContext(ctx)
	for i := range chainParts {
		g.Go(func() error {
			lo, hi := chainRange(i)
			return pgx.BeginTxFunc(gctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
				// As the audit's views: JIT compiling costs more than it
				// saves here, and a part's sort of its events spills with
				// the default work_mem.
				if _, err := tx.Exec(gctx, `SELECT set_config('statement_timeout', '0', true), set_config('jit', 'off', true),
					set_config('work_mem', '256MB', true)`); err != nil {
					return err
				}
				rows, err := tx.Query(gctx, chainQueryBetween, lo, hi)
				if err != nil {
					return err
				}
				parts[i], err = pgx.CollectRows(rows, pgx.RowToStructByPos[BrokenLink])
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, mapErr(fmt.Errorf("recompute chains: %w", err))
	}
	var out []BrokenLink
	links := slices.Concat(parts...)
	for _, l := range links {
		if len(out) == 0 || out[len(out)-1].StreamID != l.StreamID {
			out = append(out, l)
		}
	}
	return out, nil
}

// chainQueryBetween is ChainQuery over the streams whose ids are between
// $1 and $2, both included.
var chainQueryBetween = strings.Replace(ChainQuery, "    FROM events\n",
	"    FROM events WHERE stream_id BETWEEN $1 AND $2\n", 1)

// chainRange is the i-th of chainParts equal ranges of stream ids, by
// their first byte (uuids compare bytewise), bounds included.
func chainRange(i int) (lo, hi uuid.UUID) {
	lo[0] = byte(i * 256 / chainParts)
	for j := range hi {
		hi[j] = 0xff
	}
	hi[0] = byte((i+1)*256/chainParts - 1)
	return lo, hi
}
