package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/migrations"
)

// TestDistributeRefusesANegativeShardCount: a shard count below zero is a
// mistake, said before anything is migrated (0 is the default count).
func TestDistributeRefusesANegativeShardCount(t *testing.T) {
	t.Parallel()
	_, err := migrations.Distribute(context.Background(), "postgres://nowhere.invalid/none", migrations.DistributeParams{Shards: -1})
	require.ErrorContains(t, err, "not a shard count")
}
