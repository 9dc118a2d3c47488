package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// How placements are decided together: the lanes a request waits in, the
// batch each lane decides at a time, the merchants' parked lines, and what
// happens to a request a batch leaves undecided or a caller abandons. What
// a batch decides, and how, is place.go's.

// placementLanes is how many placement batches run at once: as many as
// there are cores, and at least two, so that one batch's commit overlaps the
// next one's work. More lanes make smaller batches that compete for the same
// cores: each lane past the cores' count lowered spread placement's rate and
// raised what an order costs the whole machine in CPU.
var placementLanes = max(2, runtime.GOMAXPROCS(0))

// laneOf keeps a merchant's paid orders, which lock it, in one lane; unpaid
// orders lock no merchant and spread over all lanes, so that a flash sale's
// buyers of one merchant still fill them all.
func laneOf(pl *placement) int {
	// The last byte of a v7 UUID is random.
	key := pl.orderID
	if domain.PlacementTakesMerchantLock(pl.p.PaymentRef) {
		key = pl.p.MerchantID
	}
	return int(key[15]) % placementLanes
}

// maxPlacementBatch bounds how many requests one transaction decides.
const maxPlacementBatch = 64

// placeBatchTimeout bounds one batch; the requests in it have their own
// deadlines and stop waiting when those pass.
const placeBatchTimeout = 15 * time.Second

// batchDeadline is when a batch gives up: placeBatchTimeout from now, or
// the last of its callers' deadlines if that comes first. A caller whose
// request is committing waits for the outcome, so a statement slower than
// the callers' patience must be cut short, not waited for (and, failing,
// retried one request at a time with each caller waiting on).
func batchDeadline(batch []*placement) time.Time {
	last := time.Time{}
	for _, pl := range batch {
		if pl.deadline.IsZero() {
			return time.Now().Add(placeBatchTimeout)
		}
		if pl.deadline.After(last) {
			last = pl.deadline
		}
	}
	if d := time.Now().Add(placeBatchTimeout); d.Before(last) {
		return d
	}
	return last
}

const (
	statePending int32 = iota
	stateAbandoned
	stateCommitting
)

// retryKind is why a batch left a request undecided.
type retryKind int

const (
	decided retryKind = iota
	// lockedElsewhere: another transaction holds the merchant's row; the
	// request waits with that merchant's others (park), not in its lane.
	lockedElsewhere
	// stockHeldElsewhere: the request needs stock another transaction
	// holds, which this one may not wait for without risking a deadlock; it
	// goes first in a batch of its own right after this one commits.
	stockHeldElsewhere
)

// errStockHeldElsewhere defers a request whose stock this transaction may
// not wait for (see takeStock).
var errStockHeldElsewhere = errors.New("stock held by another transaction")

// errAbandoned rolls a batch back when a caller gave up before the commit.
var errAbandoned = errors.New("a caller abandoned its placement before the commit")

// placeBatch decides a lane's batch (on Citus, one node's part of it:
// splitOnCitus, decided on that worker: batchNode). It never waits for a merchant's row: requests of a
// merchant another transaction holds are parked and decided by that
// merchant's own waiter (placeParked), in arrival order, while the lane
// goes on with other merchants.
func (s *Store) placeBatch(batch []*placement) {
	s.decideBatch(s.divertToParked(batch), batchMode{})
}

// divertToParked moves to their merchant's parked line the paid requests of
// merchants that have one, so that they are decided behind the requests
// that arrived before them.
func (s *Store) divertToParked(batch []*placement) []*placement {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	if len(s.parked) == 0 {
		return batch
	}
	kept := batch[:0:0]
	for _, pl := range batch {
		if line, ok := s.parked[pl.p.MerchantID]; ok && domain.PlacementTakesMerchantLock(pl.p.PaymentRef) {
			s.parked[pl.p.MerchantID] = append(line, pl)
			continue
		}
		kept = append(kept, pl)
	}
	return kept
}

// park queues requests behind their merchant's lock, starting the
// merchant's waiter if it has none.
func (s *Store) park(pls []*placement) {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	for _, pl := range pls {
		line, ok := s.parked[pl.p.MerchantID]
		s.parked[pl.p.MerchantID] = append(line, pl)
		if !ok {
			go s.placeParked(pl.p.MerchantID)
		}
	}
}

// placeParked decides a merchant's parked requests, waiting for its lock in
// a transaction that holds nothing of other merchants; requests that arrive
// meanwhile join the next round. The line exists until it is empty, so
// that no later request of the merchant is decided before it.
func (s *Store) placeParked(merchantID uuid.UUID) {
	for {
		s.parkMu.Lock()
		batch := s.parked[merchantID]
		if len(batch) == 0 {
			delete(s.parked, merchantID)
			s.parkMu.Unlock()
			return
		}
		s.parked[merchantID] = batch[:0:0]
		s.parkMu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), maxPlacementBatch)
			s.decideBatch(batch[:n], batchMode{waitForMerchants: true})
			batch = batch[n:]
		}
	}
}

// batchMode is how a batch takes its locks.
type batchMode struct {
	// waitForMerchants: the merchants' locks are waited for (a parked
	// merchant's line); else a merchant locked elsewhere is parked.
	waitForMerchants bool
	// numberLast: the batch takes its pickup numbers once it knows which
	// requests it places, after their stock (takePickupNumbers), instead of
	// with its first read (reservePickupNumbers).
	numberLast bool
	// rerouted: the batch was routed again after its worker no longer
	// held one of its merchants (errShardMoved); it is not routed twice.
	rerouted bool
}

// decideBatch runs one batch.
func (s *Store) decideBatch(batch []*placement, mode batchMode) {
	live := batch[:0:0]
	for _, pl := range batch {
		if pl.state.Load() == stateAbandoned {
			close(pl.done)
			continue
		}
		live = append(live, pl)
	}
	batch = live
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), batchDeadline(batch))
	defer cancel()
	err := s.inNodeTx(ctx, batchNode(batch), func(tx *txn, pt *pgkit.PipelinedTx) error {
		writes, err := s.placeInTx(ctx, tx, pt, batch, mode)
		if err != nil {
			return err
		}
		if err := claimForCommit(batch); err != nil {
			return err
		}
		if err := pt.CommitWith(ctx, writes); err != nil {
			return fmt.Errorf("write placements: %w", err)
		}
		return nil
	})
	if errors.Is(err, errAbandoned) {
		s.decideBatch(batch, mode)
		return
	}
	if errors.Is(err, errNumberLast) {
		mode.numberLast = true
		s.decideBatch(batch, mode)
		return
	}
	if err != nil {
		// Nothing committed: callers may give up again while the requests
		// are decided anew.
		for _, pl := range batch {
			pl.state.CompareAndSwap(stateCommitting, statePending)
		}
	}
	if err != nil && batchNode(batch) != "" && shardMoved(err) {
		if !mode.rerouted {
			mode.rerouted = true
			s.rerouteBatch(batch, mode)
			return
		}
		err = fmt.Errorf("%w: %w", errShardMoved, err)
	}
	if err != nil && len(batch) > 1 && domain.ErrorCode(err) != domain.CodeUnavailable {
		// One request's unexpected failure must not fail the others: place
		// each alone. An unavailable database fails them all at once.
		for _, pl := range batch {
			s.decideBatch([]*placement{pl}, mode)
		}
		return
	}
	var parked, deferred []*placement
	for _, pl := range batch {
		switch {
		case err != nil:
			pl.err = err
		case pl.retry == lockedElsewhere:
			parked = append(parked, pl)
			continue
		case pl.retry == stockHeldElsewhere:
			deferred = append(deferred, pl)
			continue
		case pl.twin != nil && pl.twin.err != nil:
			pl.err = pl.twin.err
		case pl.twin != nil && pl.twin.replayOf != uuid.Nil:
			pl.replayOf = pl.twin.replayOf
		case pl.twin != nil:
			pl.replayOf = pl.twin.orderID
		}
		close(pl.done)
	}
	if len(parked) > 0 {
		s.park(parked)
	}
	if len(deferred) > 0 {
		// Before the lane's next batch, which holds requests that arrived
		// later; numbered last, since they take stock.
		mode.numberLast = true
		s.decideBatch(deferred, mode)
	}
}

// rerouteBatch decides a batch again, each request on the worker that the
// shard map, read again, places its merchant on.
func (s *Store) rerouteBatch(batch []*placement, mode batchMode) {
	ctx, cancel := context.WithDeadline(context.Background(), batchDeadline(batch))
	defer cancel()
	for _, pl := range batch {
		if node, err := s.merchantNode(ctx, pl.p.MerchantID); err == nil {
			pl.node = node
		}
	}
	for _, part := range pgkit.GroupBy(batch, func(pl *placement) string { return pl.node }) {
		s.decideBatch(part, mode)
	}
}

// batchNode is the Citus worker on which a batch is decided: the one
// holding every merchant of it, or "" (the coordinator, or one
// PostgreSQL) when they are not all on one, which happens only to a batch
// left whole because asking whether the database is Citus failed.
func batchNode(batch []*placement) string {
	node := batch[0].node
	for _, pl := range batch[1:] {
		if pl.node != node {
			return ""
		}
	}
	return node
}

// claimForCommit marks every request of the batch as committing; if a
// caller has given up meanwhile, the others go back to pending and the batch
// is rolled back, to run again without it.
func claimForCommit(batch []*placement) error {
	for _, pl := range batch {
		if pl.retry != decided {
			// Not part of this commit: its caller may still give up.
			continue
		}
		// Committing already: an earlier attempt of this batch claimed it
		// and failed to commit (a retried deadlock, say).
		if pl.state.CompareAndSwap(statePending, stateCommitting) || pl.state.Load() == stateCommitting {
			continue
		}
		for _, other := range batch {
			other.state.CompareAndSwap(stateCommitting, statePending)
		}
		return errAbandoned
	}
	return nil
}
