package store

import (
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// River queues. Timers get a queue of their own so that their fetch settings
// can be tuned for punctuality without affecting other work.
const (
	QueueTimers  = "timers"
	QueueDefault = river.QueueDefault
)

// CloseUnpaidArgs closes an order still unpaid at its payment deadline: a
// placement's timer on Citus (on one PostgreSQL the order is its own timer,
// CloseDueUnpaid).
// MerchantID lets the close lock the order by its key without first asking
// which merchant it is (jobs inserted before it was carried have none).
type CloseUnpaidArgs struct {
	OrderID    uuid.UUID `json:"order_id"`
	MerchantID uuid.UUID `json:"merchant_id"`
}

func (CloseUnpaidArgs) Kind() string { return "close_unpaid_order" }

func (CloseUnpaidArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueTimers, MaxAttempts: 25}
}

// ExpireQueuedArgs expires an order still queued past its merchant's maximum
// wait. Seq and QueuedAt tie the job to one stay in the queue: a requeued
// order gets a new job, and the old one finds nothing to do.
type ExpireQueuedArgs struct {
	OrderID  uuid.UUID `json:"order_id"`
	QueuedAt time.Time `json:"queued_at"`
}

func (ExpireQueuedArgs) Kind() string { return "expire_queued_order" }

func (ExpireQueuedArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueTimers, MaxAttempts: 25}
}

// ResumeMerchantArgs resumes a merchant whose pause ends at Until; a pause
// replaced or resumed since makes it do nothing.
type ResumeMerchantArgs struct {
	MerchantID uuid.UUID `json:"merchant_id"`
	Until      time.Time `json:"until"`
}

func (ResumeMerchantArgs) Kind() string { return "resume_merchant" }

func (ResumeMerchantArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueTimers, MaxAttempts: 25}
}

// DrainMerchantArgs admits a merchant's queued orders while units are free.
// It is unique per merchant while pending; a trigger that arrives while one
// runs is dropped, so the worker loops and the periodic sweep covers the rest.
type DrainMerchantArgs struct {
	MerchantID uuid.UUID `json:"merchant_id"`
}

func (DrainMerchantArgs) Kind() string { return "drain_merchant" }

func (DrainMerchantArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       QueueDefault,
		MaxAttempts: 10,
		UniqueOpts: river.UniqueOpts{
			ByArgs: true,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStatePending,
				rivertype.JobStateRunning, rivertype.JobStateScheduled,
			},
		},
	}
}

// ReleaseScheduledArgs lets a merchant's scheduled orders whose release
// (their slot's start minus prep_seconds) has come into its live line.
// Every order of a slot sets one; the first to run releases them all.
type ReleaseScheduledArgs struct {
	MerchantID uuid.UUID `json:"merchant_id"`
	ReleaseAt  time.Time `json:"release_at"`
}

func (ReleaseScheduledArgs) Kind() string { return "release_scheduled_orders" }

func (ReleaseScheduledArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueTimers, MaxAttempts: 25}
}

// PeriodEdgeArgs records the capacity in force at the edge At of a period
// of a merchant's opening hours; one job per merchant and edge.
type PeriodEdgeArgs struct {
	MerchantID uuid.UUID `json:"merchant_id"`
	At         time.Time `json:"at"`
}

func (PeriodEdgeArgs) Kind() string { return "period_edge" }

func (PeriodEdgeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueTimers, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// SettleDropArgs brings a drop up to date: its transitions, lapsed windows,
// invitations and sell-out. At is the moment it was set for, so that the
// many windows an invitation round opens together share one job.
type SettleDropArgs struct {
	MerchantID uuid.UUID `json:"merchant_id"`
	DropID     uuid.UUID `json:"drop_id"`
	At         time.Time `json:"at"`
}

func (SettleDropArgs) Kind() string { return "settle_drop" }

func (SettleDropArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueTimers, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

func settleJob(merchantID, dropID uuid.UUID, at time.Time) river.InsertManyParams {
	return river.InsertManyParams{
		Args:       SettleDropArgs{MerchantID: merchantID, DropID: dropID, At: at},
		InsertOpts: &river.InsertOpts{ScheduledAt: at},
	}
}
