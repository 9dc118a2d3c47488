package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/orderd/orderd/store"
)

// SettleDropWorker brings a drop up to date at each of its times (opening,
// start, the end of a purchase window) and after every join, purchase or
// lapse that may free or use up a unit.
type SettleDropWorker struct {
	river.WorkerDefaults[store.SettleDropArgs]
	store *store.Store
}

func (w *SettleDropWorker) Work(ctx context.Context, job *river.Job[store.SettleDropArgs]) error {
	return w.store.SettleDrop(ctx, job.Args.MerchantID, job.Args.DropID)
}
