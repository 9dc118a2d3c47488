package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orderd/orderd/domain"
)

// On Citus every worker keeps a log of its own (API.md: one log per node),
// named by the node ("host:port"). An event's tx_id is its worker's
// transaction id (migrations.Distribute), so only that worker's snapshots
// can say which events a log has read: a node's log reads the worker's own
// shards of events, against the worker's snapshots, as ChangedStreams does.
// The logs' tables stay on the coordinator, where one instance at a time
// holds each log's head: the same writer rule as on one PostgreSQL, per
// node.

// eventShards are the shards of events each worker holds, by node.
func (s *Store) eventShards(ctx context.Context) (map[string][]int64, error) {
	return s.nodeShards(ctx, "events")
}

// eventNodes are the workers holding shards of events, in order.
func (s *Store) eventNodes(ctx context.Context) ([]string, error) {
	byNode, err := s.eventShards(ctx)
	return slices.Sorted(maps.Keys(byNode)), err
}

// openNodeLog makes a node's log on Citus the first time it is extended: a
// worker added to the cluster gets its log as its shards arrive. Its first
// snapshot precedes every transaction, so the first extension logs every
// event the worker holds. On one PostgreSQL it does nothing: the migration
// made its one log.
func (s *Store) openNodeLog(ctx context.Context, tx pgx.Tx, log string) error {
	if !s.Distributed(ctx) {
		return nil
	}
	if log == LogMain {
		return domain.Errorf(domain.CodeValidation, "on Citus each node keeps its own log: there is no %q", LogMain)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO log_heads (log, snapshot) VALUES ($1, '1:1:') ON CONFLICT (log) DO NOTHING`, log); err != nil {
		return fmt.Errorf("open log %s: %w", log, err)
	}
	return nil
}

// nodeEventsToLog is eventsToLog for the log of node: its events read on
// the worker, in one read-only transaction whose snapshot is the one
// returned. tx, the coordinator's, holds the log's head; through it the
// events some log already holds are left out: a shard moved to node brings
// the events another node's log read before the move.
func (s *Store) nodeEventsToLog(ctx context.Context, tx pgx.Tx, node, since string) ([]logLeaf, string, error) {
	byNode, err := s.eventShards(ctx)
	if err != nil {
		return nil, "", err
	}
	shards, ok := byNode[node]
	if !ok {
		return nil, "", domain.Errorf(domain.CodeNotFound, "no node %q holds events (the logs are %s)", node,
			strings.Join(slices.Sorted(maps.Keys(byNode)), ", "))
	}
	pool, err := s.nodePool(node)
	if err != nil {
		return nil, "", err
	}
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	b.Queue(logReadSettings)
	var now string
	b.Queue(`SELECT pg_current_snapshot()::text`).QueryRow(func(row pgx.Row) error { return row.Scan(&now) })
	var leaves []logLeaf
	events := shardsUnion(shards, func(id int64) string {
		return loggedSince(shardName("events", id), "pg_current_snapshot()", "$2")
	})
	b.Queue(`SELECT merchant_id, stream_id, version, hash FROM (`+events+`) e
		ORDER BY tx_id, global_position`, since, inProgress(since)).Query(func(rows pgx.Rows) error {
		leaves, err = collectLeaves(rows)
		return err
	})
	b.Queue(`COMMIT`)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		s.nodeFailed()
		return nil, "", mapErr(fmt.Errorf("read the log of %s: %w", node, err))
	}
	leaves, err = s.leftUnlogged(ctx, tx, leaves)
	return leaves, now, err
}

// leftUnlogged drops the leaves whose events some log already holds.
func (s *Store) leftUnlogged(ctx context.Context, tx pgx.Tx, leaves []logLeaf) ([]logLeaf, error) {
	if len(leaves) == 0 {
		return leaves, nil
	}
	streams, versions := make([]uuid.UUID, len(leaves)), make([]int32, len(leaves))
	for i, l := range leaves {
		streams[i], versions[i] = l.stream, l.version
	}
	rows, err := tx.Query(ctx, `SELECT l.stream_id, l.version FROM unnest($1::uuid[], $2::int[]) AS t(stream_id, version)
		JOIN log_leaves l ON l.stream_id = t.stream_id AND l.version = t.version`, streams, versions)
	if err != nil {
		return nil, fmt.Errorf("events logged already: %w", err)
	}
	type key struct {
		stream  uuid.UUID
		version int32
	}
	logged := map[key]bool{}
	var k key
	if _, err := pgx.ForEachRow(rows, []any{&k.stream, &k.version}, func() error { logged[k] = true; return nil }); err != nil {
		return nil, fmt.Errorf("events logged already: %w", err)
	}
	if len(logged) == 0 {
		return leaves, nil
	}
	return slices.DeleteFunc(leaves, func(l logLeaf) bool { return logged[key{l.stream, l.version}] }), nil
}

// streamLog is the log of the node that logged the stream's latest event,
// else of the node holding its merchant now.
func (s *Store) streamLog(ctx context.Context, merchantID, streamID uuid.UUID) (string, error) {
	var log string
	err := s.pool.QueryRow(ctx, `SELECT log FROM log_leaves WHERE stream_id = $1 ORDER BY version DESC LIMIT 1`, streamID).Scan(&log)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.merchantNode(ctx, merchantID)
	}
	if err != nil {
		return "", mapErr(fmt.Errorf("the log of stream %s: %w", streamID, err))
	}
	return log, nil
}
