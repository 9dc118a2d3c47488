package main

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/orderd/orderd/store"
)

// timerDropper drops payment timers from the jobs a transaction inserts.
type timerDropper struct {
	store.JobInserter
}

func (d *timerDropper) InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error) {
	params = withoutTimers(params)
	if len(params) == 0 {
		return nil, nil
	}
	return d.JobInserter.InsertManyTx(ctx, tx, params)
}

func withoutTimers(params []river.InsertManyParams) []river.InsertManyParams {
	return slices.DeleteFunc(slices.Clone(params), func(p river.InsertManyParams) bool {
		_, timer := p.Args.(store.CloseUnpaidArgs)
		return timer
	})
}

func (d *timerDropper) InsertManyFastTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) (int, error) {
	params = withoutTimers(params)
	if len(params) == 0 {
		return 0, nil
	}
	return d.JobInserter.InsertManyFastTx(ctx, tx, params)
}
