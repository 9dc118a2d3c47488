package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestResumeBackstopSweepsOnlyWhatIsOverdue: the pause backstop leaves a
// pause that has not ended, resumes one that has (as of its cutoff) through
// the resume's own write, and finds nothing the next round.
func TestResumeBackstopSweepsOnlyWhatIsOverdue(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	_, err := st.PauseMerchant(ctx, m.ID, domain.PauseRequest{Mode: domain.PauseRefuse, ForSeconds: intp(600)}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)

	n, err := st.ResumeOverdue(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Zero(t, n, "a pause with ten minutes to run")

	clock.Advance(11 * time.Minute)
	n, err = st.ResumeOverdue(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var mode *string
	var resumed int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT pause_mode, (SELECT count(*) FROM events WHERE stream_id = $1 AND type = 'merchant.resumed')
		FROM merchants WHERE id = $1`, m.ID).Scan(&mode, &resumed))
	require.Nil(t, mode)
	require.Equal(t, 1, resumed)

	n, err = st.ResumeOverdue(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Zero(t, n)
}
