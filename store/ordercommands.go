package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/pgkit"
)

// addOrderLock adds to b the read of the order's projection row into o
// under a row lock; every command on an order goes through it, so the
// version it reads is the stream's.
func addOrderLock(b *pgx.Batch, merchantID, id uuid.UUID, o *domain.Order) {
	b.Queue(`SELECT `+orderColumns+` FROM orders o WHERE o.merchant_id = $1 AND o.id = $2 FOR UPDATE`,
		[16]byte(merchantID), [16]byte(id)).QueryRow(func(row pgx.Row) error {
		err := row.Scan(scanOrderInto(o)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return errOrderNotFound
		}
		if err != nil {
			return fmt.Errorf("lock order %s: %w", id, err)
		}
		return nil
	})
}

// orderCommand runs one command on one order under the store's lock order:
// merchant, then order.
type orderCommand struct {
	orderID   uuid.UUID
	access    domain.Party
	requestID string
	// decide returns the order's new events; it may change m's load and add
	// jobs. It runs with both locks held.
	decide func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error)
	// after runs once the order's change c is decided, still in the
	// transaction, with w: c's write and the merchant's load, not yet sent.
	// It returns what is left to write, which the command sends with its
	// answer (it may send w itself first, as drain does).
	after func(tx pgx.Tx, w writeSet, c change, m *merchantRow, now time.Time) (writeSet, error)
	// noView skips reading the order back, for timers nobody waits on.
	noView bool
	// drains: the command usually lets the queue's head in (after drains),
	// so the head is read with the locks (queueHead).
	drains bool
	// onFinished: the command changes finished orders (a pickup, a
	// reopening), so it takes the locks whatever the order's status.
	onFinished bool
}

func (s *Store) runOrderCommand(ctx context.Context, cmd orderCommand) (*OrderView, error) {
	done, err := s.turns.take(ctx, cmd.orderID)
	if err != nil {
		return nil, mapErr(err)
	}
	defer done()
	var view *OrderView
	err = s.inPipelinedTx(ctx, func(tx *txn, pt *pgkit.PipelinedTx) error {
		// The merchant's lock comes before the order's, and every lock names
		// its merchant, so the command finds the order's merchant first,
		// without a lock (an order never changes merchant).
		var seen domain.Order
		b := &pgx.Batch{}
		b.Queue(`SELECT `+orderColumns+` FROM orders o WHERE o.id = $1`, cmd.orderID).QueryRow(func(row pgx.Row) error {
			return row.Scan(scanOrderInto(&seen)...)
		})
		err := tx.SendBatch(ctx, b).Close()
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && cmd.access.Actor != domain.ActorSystem && !cmd.access.MaySeeOrder(seen.CustomerID, seen.MerchantID)) {
			return errOrderNotFound
		}
		if err != nil {
			return fmt.Errorf("find order: %w", err)
		}
		merchantID := seen.MerchantID
		// The answer, the order's view, is read with the command's last
		// writes.
		var answer writeSet
		if !cmd.noView {
			answer.readBack = func(b *pgx.Batch) {
				b.Queue(orderByIDQuery, cmd.orderID).Query(func(rows pgx.Rows) (err error) {
					if view, err = scanOrderView(rows); err == nil {
						view.showPlace(domain.PlaceInLine(view.line))
					}
					return err
				})
			}
		}
		if seen.Status.Final() && !cmd.onFinished {
			// Its answer needs no lock, and a repeated tap on a finished
			// order must not queue behind, or hold up, the merchant's
			// decisions.
			m, err := scanMerchant(tx.QueryRow(ctx, `SELECT `+merchantColumns+` FROM merchants WHERE id = $1`, merchantID))
			if err != nil {
				return err
			}
			now := domain.DecisionTime(s.now(), seen.LastDecidedAt())
			events, _, err := cmd.decide(tx, seen, m, now)
			if err != nil {
				return err
			}
			if len(events) > 0 {
				return fmt.Errorf("order %s: a command changed an order that is %s", seen.ID, seen.Status)
			}
			return s.commitAndEnd(ctx, tx, pt, answer, now)
		}
		var o domain.Order
		lock := merchantLock{id: merchantID, order: &o, orderID: cmd.orderID}
		if cmd.drains {
			lock.head = newQueueHead(seen)
		}
		m, err := s.lockMerchant(ctx, tx, lock)
		if err != nil {
			return err
		}
		now := domain.DecisionTime(s.now(), m.lastDecision(), o.LastDecidedAt())
		events, jobs, err := cmd.decide(tx, o, m, now)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return s.commitAndEnd(ctx, tx, pt, answer, now)
		}
		if err := s.insertJobsWithCommit(ctx, tx, pt, jobs); err != nil {
			return err
		}
		after, err := o.Apply(events...)
		if err != nil {
			return err
		}
		c := change{before: o, after: after, events: events, meta: metaOf(cmd.access, cmd.requestID)}
		w := writeSet{loads: []*merchantRow{m}, head: lock.head}
		if err := w.add(m, c, now); err != nil {
			return err
		}
		entries, err := lockOrderEntries(ctx, tx, w.changes)
		if err != nil {
			return err
		}
		for _, oe := range entries {
			events, err := domain.EntryAfterOrder(oe.entry, oe.order.before, oe.order.after, now)
			if err != nil {
				return err
			}
			if err := w.addEntry(oe, events, now); err != nil {
				return err
			}
		}
		if cmd.after != nil {
			if w, err = cmd.after(tx, w, c, m, now); err != nil {
				return err
			}
		}
		w.readBack = answer.readBack
		return s.commitAndEnd(ctx, tx, pt, w, now)
	})
	return view, err
}

// orderTurns let one command at a time of this process act on an order,
// in the order the commands arrived. Two commands on one order (a double
// tap on Complete, two staff finishing the same ticket) would otherwise both
// read it unfinished, and the second would wait for the merchant's lock,
// which every placement of the merchant waits for too, only to find the
// order finished and roll back; waiting for the first here instead, it
// reads the order finished and takes no lock. Commands in other processes
// are kept apart by the rows' locks, as before.
type orderTurns struct {
	mu sync.Mutex
	// busy holds, per order whose turn is taken, the commands waiting for
	// it, first come first.
	busy map[uuid.UUID][]chan struct{}
}

// take waits for the order's turn, until ctx ends, and returns its release.
func (t *orderTurns) take(ctx context.Context, id uuid.UUID) (func(), error) {
	release := func() { t.passOn(id) }
	t.mu.Lock()
	if t.busy == nil {
		t.busy = map[uuid.UUID][]chan struct{}{}
	}
	waiting, taken := t.busy[id]
	if !taken {
		t.busy[id] = nil
		t.mu.Unlock()
		return release, nil
	}
	mine := make(chan struct{})
	t.busy[id] = append(waiting, mine)
	t.mu.Unlock()
	select {
	case <-mine:
		return release, nil
	case <-ctx.Done():
		t.mu.Lock()
		defer t.mu.Unlock()
		select {
		case <-mine:
			// Handed the turn as the caller gave up: hand it on.
			t.passOnLocked(id)
		default:
			t.busy[id] = slices.DeleteFunc(t.busy[id], func(c chan struct{}) bool { return c == mine })
		}
		return nil, ctx.Err()
	}
}

// passOn hands the order's turn to its first waiting command, if any.
func (t *orderTurns) passOn(id uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.passOnLocked(id)
}

func (t *orderTurns) passOnLocked(id uuid.UUID) {
	waiting := t.busy[id]
	if len(waiting) == 0 {
		delete(t.busy, id)
		return
	}
	close(waiting[0])
	t.busy[id] = waiting[1:]
}

// PayOrder pays an unpaid order and admits or queues it. Paying again with the
// same reference answers the current order and changes nothing. The deadline
// is checked here, in the payment's own transaction, whether or not the close
// timer has run.
func (s *Store) PayOrder(ctx context.Context, orderID uuid.UUID, paymentRef string, access domain.Party, requestID string) (*OrderView, error) {
	return s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: access, requestID: requestID,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			events, load, err := domain.Pay(o, paymentRef, m.load(), m.maxQueueWait(), now)
			if err != nil || len(events) == 0 {
				return nil, nil, err
			}
			if o.NeedsPickupCodeAtPayment() {
				loc, err := m.location()
				if err != nil {
					return nil, nil, err
				}
				issued, err := numberAtPayment(ctx, tx, m.ID, domain.LocalDay(o.PlacedAt, loc))
				if err != nil {
					return nil, nil, err
				}
				events = domain.StampPickupCode(events, domain.PickupCode(m.PickupPrefix, issued))
			}
			m.setLoad(load)
			after, err := o.Apply(events...)
			if err != nil {
				return nil, nil, err
			}
			switch after.Status {
			case domain.StatusQueued:
				return events, s.expiryJobs(after), nil
			case domain.StatusScheduled:
				return events, []river.InsertManyParams{releaseJob(after)}, nil
			}
			return events, nil, nil
		},
	})
}

// CancelOrder cancels on behalf of access.Actor; stock and capacity are
// released, and a freed unit goes to the head of the queue at once.
func (s *Store) CancelOrder(ctx context.Context, orderID uuid.UUID, reason string, access domain.Party, requestID string) (*OrderView, error) {
	return s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: access, requestID: requestID, drains: true,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			events, load, err := domain.Cancel(o, access.Actor, reason, m.load(), now)
			if err != nil {
				return nil, nil, err
			}
			m.setLoad(load)
			return events, nil, nil
		},
		after: func(tx pgx.Tx, w writeSet, c change, m *merchantRow, now time.Time) (writeSet, error) {
			if err := giveBack(ctx, tx, &w, c); err != nil {
				return w, err
			}
			// A freed unit, or a queued order leaving (the head, say, whose
			// load did not fit), may let the head in.
			if c.before.Status == domain.StatusAccepted || c.before.Status == domain.StatusQueued {
				return s.drainAfter(ctx, tx, m, w, now)
			}
			return w, nil
		},
	})
}

// CompleteOrder finishes an accepted order; its unit goes to the head of the
// queue in the same transaction. Only its merchant or an admin completes
// it, not even its customer.
func (s *Store) CompleteOrder(ctx context.Context, orderID uuid.UUID, access domain.Party, requestID string) (*OrderView, error) {
	return s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: access, requestID: requestID, drains: true,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			if !access.MayServe(m.ID) {
				return nil, nil, errNotYourOrders
			}
			events, load, err := domain.Complete(o, m.load(), now)
			if err != nil {
				return nil, nil, err
			}
			m.stats = m.stats.ObserveCompletion(now, m.Load.Queued > 0, o.Load)
			m.setLoad(load)
			return events, nil, nil
		},
		after: func(tx pgx.Tx, w writeSet, c change, m *merchantRow, now time.Time) (writeSet, error) {
			return s.drainAfter(ctx, tx, m, w, now)
		},
	})
}

// PickUpOrder records that a completed order left the counter; picking it
// up again answers the order as it is.
func (s *Store) PickUpOrder(ctx context.Context, orderID uuid.UUID, access domain.Party, requestID string) (*OrderView, error) {
	return s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: access, requestID: requestID, onFinished: true,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			if !access.MayServe(m.ID) {
				return nil, nil, errNotYourOrders
			}
			events, err := domain.PickUp(o, now)
			return events, nil, err
		},
	})
}

// ReopenOrder undoes a completion within domain.ReopenWindow: the order is
// accepted again and holds its load at once, ahead of the queued orders.
func (s *Store) ReopenOrder(ctx context.Context, orderID uuid.UUID, access domain.Party, requestID string) (*OrderView, error) {
	return s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: access, requestID: requestID, onFinished: true,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			if !access.MayServe(m.ID) {
				return nil, nil, errNotYourOrders
			}
			events, load, err := domain.Reopen(o, m.load(), now)
			if err != nil {
				return nil, nil, err
			}
			m.setLoad(load)
			return events, nil, nil
		},
	})
}

// PrioritizeOrder moves a queued order to the tail of the priority lane;
// if the priority head can be admitted now, it is, in the same transaction.
func (s *Store) PrioritizeOrder(ctx context.Context, orderID uuid.UUID, reason string, access domain.Party, requestID string) (*OrderView, error) {
	return s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: access, requestID: requestID,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			if !access.MayPrioritize(m.ID) {
				return nil, nil, errNotYourOrders
			}
			events, load, err := domain.Prioritize(o, access.Actor, reason, m.load(), now)
			if err != nil {
				return nil, nil, err
			}
			m.setLoad(load)
			return events, nil, nil
		},
		after: func(tx pgx.Tx, w writeSet, _ change, m *merchantRow, now time.Time) (writeSet, error) {
			return s.drainAfter(ctx, tx, m, w, now)
		},
	})
}

// ExpireQueued expires an order still queued past its merchant's maximum wait
// (for the stay in the queue that began at queuedAt), releases its stock and
// files a dead letter. It reports whether the order expired.
func (s *Store) ExpireQueued(ctx context.Context, orderID uuid.UUID, queuedAt time.Time) (bool, error) {
	expired := false
	_, err := s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: domain.Party{Actor: domain.ActorSystem}, noView: true,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			if o.QueuedAt == nil || !o.QueuedAt.Equal(queuedAt) {
				return nil, nil, nil
			}
			events, load := domain.Expire(o, m.load(), now)
			expired = len(events) > 0
			m.setLoad(load)
			return events, nil, nil
		},
		after: func(tx pgx.Tx, w writeSet, c change, m *merchantRow, now time.Time) (writeSet, error) {
			if err := giveBack(ctx, tx, &w, c); err != nil {
				return w, err
			}
			waited := now.Sub(*c.before.QueuedAt).Round(time.Second)
			_, err := tx.Exec(ctx, `
				INSERT INTO dead_letters (id, kind, ref_id, merchant_id, reason, attempts, created_at)
				VALUES ($1, 'order', $2, $3, $4, 1, $5)
				ON CONFLICT (kind, ref_id, merchant_id) WHERE resolved_at IS NULL DO NOTHING`,
				newID(), c.after.ID, m.ID, fmt.Sprintf("waited %s in the queue, over the limit of %ds", waited, m.MaxQueueWaitSeconds), now)
			if err != nil {
				return w, fmt.Errorf("file dead letter: %w", err)
			}
			// The head leaving may let the next one in.
			return s.drainAfter(ctx, tx, m, w, now)
		},
	})
	if errors.Is(err, domain.ErrNotFound) {
		return false, nil
	}
	return expired, err
}

// ExpireQueuedOverdue expires up to limit queued orders whose wait limit is
// before cutoff and reports how many it found: the backstop behind the
// queue expiry timers.
func (s *Store) ExpireQueuedOverdue(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	return sweepOverdue(ctx, s, "overdue queued", "orders", func(from string) string {
		return `SELECT id, merchant_id, queued_at, queue_expires_at FROM ` + from + `
		WHERE status = 'queued' AND queue_expires_at < $1 ORDER BY queue_expires_at LIMIT $2`
	}, cutoff, limit, func(q QueuedStay) error {
		_, err := s.ExpireQueued(ctx, q.ID, q.QueuedAt)
		return err
	})
}

// RetryDeadLetter sends an expired order back to its place in the queue (ahead
// of every order queued after it, with a fresh expiry) or hands a webhook back
// to the relay.
func (s *Store) RetryDeadLetter(ctx context.Context, id uuid.UUID, access domain.Party, requestID string) (*DeadLetter, error) {
	dl, err := s.GetDeadLetter(ctx, id)
	if err != nil {
		return nil, err
	}
	if dl.ResolvedAt != nil {
		return nil, domain.Errorf(domain.CodeInvalidTransition, "the dead letter is already resolved")
	}
	switch dl.Kind {
	case DeadLetterOrder:
		if _, err := s.requeueOrder(ctx, dl.RefID, id, access, requestID); err != nil {
			return nil, err
		}
	case DeadLetterWebhook:
		if err := s.RetryWebhook(ctx, dl.MerchantID, dl.RefID, id); err != nil {
			return nil, err
		}
	}
	return s.GetDeadLetter(ctx, id)
}

// requeueOrder puts an expired order back in its merchant's line at its
// original place; used by the dead-letter retry.
func (s *Store) requeueOrder(ctx context.Context, orderID, deadLetterID uuid.UUID, access domain.Party, requestID string) (*OrderView, error) {
	return s.runOrderCommand(ctx, orderCommand{
		orderID: orderID, access: access, requestID: requestID,
		decide: func(tx pgx.Tx, o domain.Order, m *merchantRow, now time.Time) ([]domain.Event, []river.InsertManyParams, error) {
			var dropOrder bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM drop_entries WHERE merchant_id = $1 AND order_id = $2)`, m.ID, o.ID).
				Scan(&dropOrder); err != nil {
				return nil, nil, fmt.Errorf("find drop entry: %w", err)
			}
			if dropOrder {
				return nil, nil, domain.ErrDropOrderNotRequeued
			}
			events, load, err := domain.Requeue(o, m.load(), m.maxQueueWait(), now)
			if err != nil {
				return nil, nil, err
			}
			m.setLoad(load)
			after, err := o.Apply(events...)
			if err != nil {
				return nil, nil, err
			}
			products, err := loadProducts(ctx, tx, m.ID, itemIDs(o.Items))
			if err != nil {
				return nil, nil, err
			}
			if err := domain.RefuseStock(stockLines(after, products, nil)); err != nil {
				return nil, nil, err
			}
			if err := retakeStock(ctx, tx, after, products); err != nil {
				return nil, nil, err
			}
			return events, s.expiryJobs(after), nil
		},
		after: func(tx pgx.Tx, w writeSet, _ change, m *merchantRow, now time.Time) (writeSet, error) {
			if err := closeDeadLetter(ctx, tx, m.ID, deadLetterID, "retried", ""); err != nil {
				return w, err
			}
			return s.drainAfter(ctx, tx, m, w, now)
		},
	})
}

// retakeStock takes again the units and claims that an expired order's
// expiry gave back. Unlike a placement batch, the retry waits for every
// bucket of its products: it is rare, holds no other bucket, and so is never
// answered sold out while a bucket it did not wait for is being given
// units. A refusal fails the retry's whole transaction, so nothing it took
// needs putting back.
func retakeStock(ctx context.Context, tx pgx.Tx, o domain.Order, products map[uuid.UUID]productInfo) error {
	var limited []domain.Item
	var limitedIDs []uuid.UUID
	guarded := false
	for _, it := range sortedItems(o.Items) {
		p := products[it.ProductID]
		guarded = guarded || p.limited || p.perUserLimit != nil
		if p.limited {
			limited, limitedIDs = append(limited, it), append(limitedIDs, it.ProductID)
		}
	}
	if !guarded {
		return nil
	}
	locks := &pgx.Batch{}
	var refused error
	addClaims(locks, o, domain.ClaimsOf(stockLines(o, products, nil)), &refused, func(domain.Claim) {})
	held := addLockBuckets(locks, o.MerchantID, limitedIDs)
	if err := tx.SendBatch(ctx, locks).Close(); err != nil {
		return fmt.Errorf("lock stock: %w", err)
	}
	if refused != nil {
		return refused
	}
	takes := &pgx.Batch{}
	for _, it := range limited {
		fromBuckets, err := domain.TakeFromBuckets(it.ProductID, held[it.ProductID], it.Quantity)
		if err != nil {
			return err
		}
		addTake(takes, takenFrom(o.MerchantID, it.ProductID, fromBuckets))
	}
	if takes.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, takes).Close(); err != nil {
		return fmt.Errorf("take stock: %w", err)
	}
	return nil
}

func itemIDs(items []domain.Item) []uuid.UUID {
	ids := make([]uuid.UUID, len(items))
	for i, it := range items {
		ids[i] = it.ProductID
	}
	return ids
}

// giveBack returns what an order that a command ended held: its units and
// the customer's claims, and its pickup slot's room as domain.SlotReturn
// says, which w writes.
func giveBack(ctx context.Context, tx pgx.Tx, w *writeSet, c change) error {
	if err := releaseStock(ctx, tx, c.after); err != nil {
		return err
	}
	if at, load, ok := domain.SlotReturn(c.before, c.after); ok {
		w.returnSlot(c.after.MerchantID, at, load)
	}
	return nil
}

// drainAfter lets in from the line what a command's change made room for,
// as domain.DrainLine decides on the line's head, and returns w with the
// admissions.
func (s *Store) drainAfter(ctx context.Context, tx pgx.Tx, m *merchantRow, w writeSet, now time.Time) (writeSet, error) {
	head, err := s.readLineHead(ctx, tx, m, s.cfg.InlineDrainLimit, w, now)
	if err != nil {
		return w, err
	}
	return head.admit(domain.DrainLine(head.orders, m.load(), head.limit, now))
}

var errNotYourOrders = domain.Errorf(domain.CodeForbidden, "only the order's merchant or an admin may do this")
