package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"
)

// A log's stored hashes (tlog's layout: StoredHashIndex(level, n)) are kept
// in tiles of tileHashes consecutive indexes, a row each (migration 34): a
// leaf adds one to a few hashes, which as rows of their own cost more than
// the leaf's row.
const tileHashes = 32

// writeHashTiles stores a log's hashes from index start on, the ones an
// extension computed: a tile the last extension left part-filled gets the
// new hashes after its own, the others are new rows.
func writeHashTiles(ctx context.Context, tx pgx.Tx, log string, start int64, hashes []tlog.Hash) error {
	if len(hashes) == 0 {
		return nil
	}
	var tiles []int64
	var contents [][]byte
	for i, h := range hashes {
		tile := (start + int64(i)) / tileHashes
		if len(tiles) == 0 || tiles[len(tiles)-1] != tile {
			tiles = append(tiles, tile)
			contents = append(contents, make([]byte, 0, tileHashes*len(h)))
		}
		contents[len(contents)-1] = append(contents[len(contents)-1], h[:]...)
	}
	// Only the first tile may exist, holding exactly the hashes before
	// start; anything else there would be a second writer or a broken
	// table, and the count of rows written says so.
	tag, err := tx.Exec(ctx, `INSERT INTO log_hash_tiles AS t (log, tile, hashes)
		SELECT $1, tile, hashes FROM unnest($2::bigint[], $3::bytea[]) AS n (tile, hashes)
		ON CONFLICT (log, tile) DO UPDATE SET hashes = t.hashes || EXCLUDED.hashes
		WHERE t.tile = $4 AND length(t.hashes) = $5`,
		log, tiles, contents, start/tileHashes, start%tileHashes*int64(len(tlog.Hash{})))
	if err != nil {
		return fmt.Errorf("write log hashes: %w", err)
	}
	if tag.RowsAffected() != int64(len(tiles)) {
		return fmt.Errorf("write log hashes: log %s's tiles do not end at hash %d", log, start)
	}
	return nil
}

// hashOverlay reads a log's stored hashes, those of the extension under way
// first.
type hashOverlay struct {
	ctx   context.Context
	q     querier
	log   string
	added map[int64]tlog.Hash
}

func newHashOverlay(ctx context.Context, q querier, log string) *hashOverlay {
	return &hashOverlay{ctx: ctx, q: q, log: log, added: map[int64]tlog.Hash{}}
}

// ReadHashes implements tlog.HashReader.
func (o *hashOverlay) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var tiles []int64
	asked := map[int64]bool{}
	for i, idx := range indexes {
		if h, ok := o.added[idx]; ok {
			out[i] = h
		} else if tile := idx / tileHashes; !asked[tile] {
			asked[tile] = true
			tiles = append(tiles, tile)
		}
	}
	if len(tiles) == 0 {
		return out, nil
	}
	rows, err := o.q.Query(o.ctx, `SELECT tile, hashes FROM log_hash_tiles WHERE log = $1 AND tile = ANY($2)`, o.log, tiles)
	if err != nil {
		return nil, fmt.Errorf("read log hashes: %w", err)
	}
	var tile int64
	var content []byte
	// Stored hashes never change: the next leaf or proof that needs one
	// of the same tiles finds it here instead of asking again.
	if _, err := pgx.ForEachRow(rows, []any{&tile, &content}, func() error {
		for j := 0; j+len(tlog.Hash{}) <= len(content); j += len(tlog.Hash{}) {
			o.added[tile*tileHashes+int64(j/len(tlog.Hash{}))] = tlog.Hash(content[j : j+len(tlog.Hash{})])
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read log hashes: %w", err)
	}
	for i, idx := range indexes {
		h, ok := o.added[idx]
		if !ok {
			return nil, fmt.Errorf("log %s has no stored hash %d", o.log, idx)
		}
		out[i] = h
	}
	return out, nil
}

// prefetch reads, in one query, every hash the proofs will read: a proof's
// indexes depend on the tree's size and the leaf only, so a first pass with
// placeholder hashes learns them.
func (o *hashOverlay) prefetch(prove func(tlog.HashReader) error) error {
	var want []int64
	record := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		want = append(want, indexes...)
		return make([]tlog.Hash, len(indexes)), nil
	})
	if err := prove(record); err != nil {
		return err
	}
	if len(want) == 0 {
		return nil
	}
	_, err := o.ReadHashes(want)
	return err
}
