package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/google/uuid"

	"github.com/orderd/orderd/domain"
)

func TestOrderLoad(t *testing.T) {
	t.Parallel()
	items := []domain.Item{{ProductID: testID("tea"), Quantity: 3}, {ProductID: testID("carrier"), Quantity: 2}}
	units := []int{1, 6}
	require.Equal(t, 1, domain.OrderLoad(domain.UnitOrders, items, units), "orders: every order weighs 1")
	require.Equal(t, 15, domain.OrderLoad(domain.UnitItems, items, units), "items: Σ quantity × units per unit")
	require.Equal(t, 5, domain.OrderLoad(domain.UnitItems, items, []int{0, 0}), "no units weigh the default 1")
	require.Equal(t, 1, domain.OrderLoad("", items, units), "no unit is orders")
}

// weighted builds a consistent load: active units held by activeOrders,
// and queued orders of the given loads in the normal lane.
func weighted(capacity, active, activeOrders int, queued ...int) domain.Load {
	l := domain.Load{Capacity: capacity, Active: active, ActiveOrders: activeOrders, NextSeq: 1}
	for _, q := range queued {
		l.Queued++
		l.QueuedUnits += q
		l.NextSeq++
	}
	return l
}

func placeWeighted(t *testing.T, id string, load int, lane domain.Lane) domain.Order {
	t.Helper()
	events, err := domain.Place(domain.PlaceParams{
		OrderID: testID(id), MerchantID: merchantID, CustomerID: "alice",
		Lines:           []domain.LineRequest{{ProductID: productID, Quantity: load}},
		Products:        map[uuid.UUID]domain.ProductRef{productID: {ID: productID, MerchantID: merchantID, PriceCents: 450, LoadUnits: 1}},
		PaymentDeadline: t0.Add(deadline), Unit: domain.UnitItems, Lane: lane,
	}, t0)
	require.NoError(t, err)
	o := mustApply(t, domain.Order{}, events...)
	require.Equal(t, load, o.Load)
	return o
}

func TestWeightedAdmission(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		load   domain.Load
		order  int
		lane   domain.Lane
		accept bool
	}{
		{"fits exactly", weighted(10, 4, 2), 6, domain.LaneNormal, true},
		{"one unit short", weighted(10, 5, 2), 6, domain.LaneNormal, false},
		{"oversized order in an empty kitchen goes alone", weighted(20, 0, 0), 30, domain.LaneNormal, true},
		{"oversized order waits for the kitchen to empty", weighted(20, 1, 1), 30, domain.LaneNormal, false},
		{"capacity 0 admits nothing, even into an empty kitchen", weighted(0, 0, 0), 1, domain.LaneNormal, false},
		{"a normal order never overtakes a queue", weighted(10, 8, 2, 5), 1, domain.LaneNormal, false},
		{"a priority order goes before the normal lane's head", weighted(10, 8, 2, 5), 1, domain.LanePriority, true},
		{"a priority order that does not fit queues", weighted(10, 8, 2, 5), 3, domain.LanePriority, false},
		{"paused: nobody is admitted", func() domain.Load { l := weighted(10, 0, 0); l.Paused = true; return l }(), 1, domain.LaneNormal, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := mustPay(t, placeWeighted(t, "o", tc.order, tc.lane), tc.load)
			require.NoError(t, err)
			after := o.load
			if tc.accept {
				require.Equal(t, domain.StatusAccepted, o.order.Status)
				require.Equal(t, tc.load.Active+tc.order, after.Active)
				require.Equal(t, tc.load.ActiveOrders+1, after.ActiveOrders)
				require.Equal(t, tc.load.Queued, after.Queued)
				return
			}
			require.Equal(t, domain.StatusQueued, o.order.Status)
			require.Equal(t, tc.lane, o.order.Lane)
			require.Equal(t, tc.load.Active, after.Active)
			require.Equal(t, tc.load.Queued+1, after.Queued)
			require.Equal(t, tc.load.QueuedUnits+tc.order, after.QueuedUnits)
			if tc.lane == domain.LanePriority {
				require.Equal(t, tc.load.QueuedPriority+1, after.QueuedPriority)
			}
		})
	}
}

type paid struct {
	order domain.Order
	load  domain.Load
}

func mustPay(t *testing.T, o domain.Order, load domain.Load) (paid, error) {
	t.Helper()
	events, load, err := domain.Pay(o, "ref-"+o.ID.String(), load, maxWait, t0)
	if err != nil {
		return paid{}, err
	}
	return paid{mustApply(t, o, events...), load}, nil
}

// kitchen runs the domain's commands over one merchant the way the store
// does: the queue is the two lanes, drained head first.
type kitchen struct {
	t        *testing.T
	load     domain.Load
	orders   map[string]domain.Order
	names    map[uuid.UUID]string // the orders' names by id
	admitted []string
}

func newKitchen(t *testing.T, capacity int) *kitchen {
	return &kitchen{t: t, load: domain.Load{Capacity: capacity, NextSeq: 1}, orders: map[string]domain.Order{}, names: map[uuid.UUID]string{}}
}

func (k *kitchen) pay(id string, load int, lane domain.Lane) {
	k.t.Helper()
	p, err := mustPay(k.t, placeWeighted(k.t, id, load, lane), k.load)
	require.NoError(k.t, err)
	k.orders[id], k.names[p.order.ID], k.load = p.order, id, p.load
	if p.order.Status == domain.StatusAccepted {
		k.admitted = append(k.admitted, id)
	}
}

// head is the queued order admitted next: the priority lane's first by
// sequence, else the normal lane's.
func (k *kitchen) head() (domain.Order, bool) {
	var best domain.Order
	found := false
	for _, o := range k.orders {
		if o.Status != domain.StatusQueued {
			continue
		}
		if !found || (o.Lane == domain.LanePriority && best.Lane != domain.LanePriority) ||
			(o.Lane == best.Lane && o.QueueSeq < best.QueueSeq) {
			best, found = o, true
		}
	}
	return best, found
}

func (k *kitchen) drain() {
	k.t.Helper()
	for {
		h, ok := k.head()
		if !ok || !k.load.CanDrain(h.Load) {
			return
		}
		e, load, err := domain.AdmitQueued(h, k.load, t0)
		require.NoError(k.t, err)
		require.True(k.t, load.Active <= load.Capacity || load.ActiveOrders == 1, "over capacity with company: %+v", load)
		name := k.names[h.ID]
		k.orders[name], k.load = mustApply(k.t, h, e), load
		k.admitted = append(k.admitted, name)
	}
}

func (k *kitchen) complete(id string) {
	k.t.Helper()
	events, load, err := domain.Complete(k.orders[id], k.load, t0)
	require.NoError(k.t, err)
	k.orders[id], k.load = mustApply(k.t, k.orders[id], events...), load
	k.drain()
}

func TestNothingOvertakesTheHead(t *testing.T) {
	t.Parallel()
	k := newKitchen(t, 10)
	k.pay("a", 8, domain.LaneNormal)
	k.pay("big", 5, domain.LaneNormal)
	k.pay("small", 1, domain.LaneNormal)
	k.drain()
	require.Equal(t, []string{"a"}, k.admitted, "small would fit in the 2 free units but must not pass big")
	k.complete("a")
	require.Equal(t, []string{"a", "big", "small"}, k.admitted)
	require.Equal(t, 6, k.load.Active)
	require.Equal(t, 2, k.load.ActiveOrders)
}

func TestOversizedOrderGoesAloneThenTheQueueResumes(t *testing.T) {
	t.Parallel()
	k := newKitchen(t, 20)
	k.pay("a", 3, domain.LaneNormal)
	k.pay("huge", 30, domain.LaneNormal)
	k.pay("b", 1, domain.LaneNormal)
	require.Equal(t, []string{"a"}, k.admitted)
	k.complete("a")
	require.Equal(t, []string{"a", "huge"}, k.admitted, "huge is admitted alone into the empty kitchen; b waits behind it")
	require.Equal(t, 30, k.load.Active)
	k.complete("huge")
	require.Equal(t, []string{"a", "huge", "b"}, k.admitted)
}

func TestPriorityLaneGoesFirstAndEachLaneIsFIFO(t *testing.T) {
	t.Parallel()
	k := newKitchen(t, 2)
	k.pay("busy", 2, domain.LaneNormal)
	k.pay("n1", 1, domain.LaneNormal)
	k.pay("n2", 1, domain.LaneNormal)
	k.pay("p1", 2, domain.LanePriority)
	k.pay("p2", 1, domain.LanePriority)
	k.complete("busy")
	require.Equal(t, []string{"busy", "p1"}, k.admitted)
	k.complete("p1")
	require.Equal(t, []string{"busy", "p1", "p2", "n1"}, k.admitted)
	k.complete("p2")
	k.complete("n1")
	require.Equal(t, []string{"busy", "p1", "p2", "n1", "n2"}, k.admitted)
}

func TestPrioritize(t *testing.T) {
	t.Parallel()
	k := newKitchen(t, 1)
	k.pay("busy", 1, domain.LaneNormal)
	k.pay("n1", 1, domain.LaneNormal)
	k.pay("n2", 1, domain.LaneNormal)
	k.pay("p1", 1, domain.LanePriority)

	events, load, err := domain.Prioritize(k.orders["n2"], domain.ActorMerchant, "birthday", k.load, t0)
	require.NoError(t, err)
	require.Equal(t, []domain.Event{{Type: domain.EventOrderPrioritized, Data: domain.OrderPrioritized{
		Seq: 4, Reason: "birthday", By: domain.ActorMerchant, PrioritizedAt: t0,
	}}}, events)
	require.Equal(t, 2, load.QueuedPriority)
	require.Equal(t, k.load.Queued, load.Queued, "moving lanes keeps the order queued")
	k.orders["n2"], k.load = mustApply(t, k.orders["n2"], events...), load
	require.Equal(t, domain.LanePriority, k.orders["n2"].Lane)

	again, same, err := domain.Prioritize(k.orders["n2"], domain.ActorAdmin, "", k.load, t0)
	require.NoError(t, err)
	require.Empty(t, again, "already in the priority lane: a no-op")
	require.Equal(t, k.load, same)

	_, _, err = domain.Prioritize(k.orders["busy"], domain.ActorAdmin, "", k.load, t0)
	require.Equal(t, domain.CodeInvalidTransition, domain.ErrorCode(err), "only a queued order moves")
	_, _, err = domain.Prioritize(k.orders["n1"], domain.ActorAdmin, string(make([]byte, domain.MaxReasonLength+1)), k.load, t0)
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err))

	k.complete("busy")
	k.complete("p1")
	k.complete("n2")
	require.Equal(t, []string{"busy", "p1", "n2", "n1"}, k.admitted, "n2 joined the priority lane behind p1")
}

func TestPauseRequests(t *testing.T) {
	t.Parallel()
	m := domain.Merchant{ID: uuid.New(), Version: 1}
	secs := func(n int) *int { return &n }
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	cases := []struct {
		name  string
		req   domain.PauseRequest
		code  domain.Code
		until *time.Time
	}{
		{"queue, open-ended", domain.PauseRequest{Mode: domain.PauseQueue}, "", nil},
		{"refuse until", domain.PauseRequest{Mode: domain.PauseRefuse, Until: at(time.Hour)}, "", at(time.Hour)},
		{"until, finer than a microsecond", domain.PauseRequest{Mode: domain.PauseRefuse, Until: at(time.Hour + 1500*time.Nanosecond)}, "", at(time.Hour + time.Microsecond)},
		{"for seconds", domain.PauseRequest{Mode: domain.PauseQueue, ForSeconds: secs(90)}, "", at(90 * time.Second)},
		{"unknown mode", domain.PauseRequest{Mode: "nap"}, domain.CodeValidation, nil},
		{"no mode", domain.PauseRequest{}, domain.CodeValidation, nil},
		{"until in the past", domain.PauseRequest{Mode: domain.PauseQueue, Until: at(-time.Second)}, domain.CodeValidation, nil},
		{"until now", domain.PauseRequest{Mode: domain.PauseQueue, Until: at(0)}, domain.CodeValidation, nil},
		{"until beyond a day", domain.PauseRequest{Mode: domain.PauseQueue, Until: at(25 * time.Hour)}, domain.CodeValidation, nil},
		{"both until and for_seconds", domain.PauseRequest{Mode: domain.PauseQueue, Until: at(time.Hour), ForSeconds: secs(60)}, domain.CodeValidation, nil},
		{"for_seconds 0", domain.PauseRequest{Mode: domain.PauseQueue, ForSeconds: secs(0)}, domain.CodeValidation, nil},
		{"for_seconds over a day", domain.PauseRequest{Mode: domain.PauseQueue, ForSeconds: secs(86401)}, domain.CodeValidation, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events, err := domain.PauseMerchant(m, tc.req, domain.ActorMerchant, t0)
			if tc.code != "" {
				require.Equal(t, tc.code, domain.ErrorCode(err))
				require.Empty(t, events)
				return
			}
			require.NoError(t, err)
			require.Len(t, events, 1)
			folded, err := m.Evolve(events[0])
			require.NoError(t, err)
			require.Equal(t, tc.req.Mode, folded.Pause.Mode)
			require.Equal(t, tc.until, folded.Pause.Until)
			require.Equal(t, tc.req.Mode == domain.PauseRefuse, folded.Pause.Refuses())
		})
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	m := domain.Merchant{ID: uuid.New(), Version: 1}
	require.Empty(t, domain.ResumeMerchant(m, domain.ActorAdmin, t0), "resuming an unpaused merchant is a no-op")

	secs := 60
	events, err := domain.PauseMerchant(m, domain.PauseRequest{Mode: domain.PauseRefuse, ForSeconds: &secs}, domain.ActorMerchant, t0)
	require.NoError(t, err)
	paused, err := m.Evolve(events[0])
	require.NoError(t, err)
	end := t0.Add(time.Minute)
	require.Equal(t, 30*time.Second, paused.Pause.RetryAfter(t0.Add(30*time.Second)))
	require.Zero(t, paused.Pause.RetryAfter(end), "the end has come")

	require.Empty(t, domain.ResumeDue(paused, end, end.Add(-time.Millisecond)), "a timer that fires early does nothing")
	require.Empty(t, domain.ResumeDue(paused, end.Add(time.Second), end.Add(time.Second)), "a timer of another pause does nothing")
	due := domain.ResumeDue(paused, end, end.Add(200*time.Millisecond))
	require.Equal(t, []domain.Event{{Type: domain.EventMerchantResumed, Data: domain.MerchantResumed{
		By: domain.ActorSystem, Scheduled: true, ResumedAt: end.Add(200 * time.Millisecond),
	}}}, due)
	resumed, err := paused.Evolve(due[0])
	require.NoError(t, err)
	require.False(t, resumed.Pause.Paused())
	require.Equal(t, 3, resumed.Version)

	manual := domain.ResumeMerchant(paused, domain.ActorMerchant, t0)
	require.Equal(t, []domain.Event{{Type: domain.EventMerchantResumed, Data: domain.MerchantResumed{By: domain.ActorMerchant, ResumedAt: t0}}}, manual)
}

func TestMerchantUnitZoneAndPrefixValidation(t *testing.T) {
	t.Parallel()
	base := domain.MerchantSettings{Name: "Tea", Capacity: 10, PrepSeconds: 60, MaxQueueWaitSeconds: 600, PaymentTimeoutSeconds: 300}
	cases := []struct {
		name string
		edit func(*domain.MerchantSettings)
		ok   bool
	}{
		{"defaults", func(*domain.MerchantSettings) {}, true},
		{"items", func(s *domain.MerchantSettings) { s.CapacityUnit = domain.UnitItems }, true},
		{"unknown unit", func(s *domain.MerchantSettings) { s.CapacityUnit = "cups" }, false},
		{"IANA zone", func(s *domain.MerchantSettings) { s.Timezone = "Asia/Shanghai" }, true},
		{"unknown zone", func(s *domain.MerchantSettings) { s.Timezone = "Mars/Olympus" }, false},
		{"Local is no IANA zone", func(s *domain.MerchantSettings) { s.Timezone = "Local" }, false},
		{"two letters", func(s *domain.MerchantSettings) { s.PickupPrefix = "AB" }, true},
		{"three letters", func(s *domain.MerchantSettings) { s.PickupPrefix = "ABC" }, false},
		{"lower case", func(s *domain.MerchantSettings) { s.PickupPrefix = "a" }, false},
		{"digit", func(s *domain.MerchantSettings) { s.PickupPrefix = "A1" }, false},
		{"non-ASCII letter", func(s *domain.MerchantSettings) { s.PickupPrefix = "É" }, false},
	}
	for _, tc := range cases {
		s := base
		tc.edit(&s)
		err := s.Validate()
		if tc.ok {
			require.NoError(t, err, tc.name)
		} else {
			require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), tc.name)
		}
	}
	for _, n := range []int{0, -1, 101} {
		require.Equal(t, domain.CodeValidation, domain.ErrorCode(domain.ValidateLoadUnits(n)), "load_units %d", n)
	}
	for _, n := range []int{1, 6, 100} {
		require.NoError(t, domain.ValidateLoadUnits(n), "load_units %d", n)
	}
}

func TestCapacityUnitChangesOnlyWhenIdle(t *testing.T) {
	t.Parallel()
	orders := domain.MerchantSettings{Name: "Tea", Capacity: 10}
	items := orders
	items.CapacityUnit = domain.UnitItems
	require.NoError(t, domain.CheckSettingsChange(orders, items, domain.Load{Capacity: 10}))
	require.Equal(t, domain.CodeConflict, domain.ErrorCode(domain.CheckSettingsChange(orders, items, weighted(10, 1, 1))), "an accepted order")
	require.Equal(t, domain.CodeConflict, domain.ErrorCode(domain.CheckSettingsChange(items, orders, weighted(0, 0, 0, 3))), "a queued order")
	more := orders
	more.Capacity = 20
	require.NoError(t, domain.CheckSettingsChange(orders, more, weighted(10, 5, 5, 1)), "capacity changes any time")
	explicit := orders
	explicit.CapacityUnit = domain.UnitOrders
	require.NoError(t, domain.CheckSettingsChange(orders, explicit, weighted(10, 5, 5, 1)), "orders is the default: no change")
}

func TestPickupCodes(t *testing.T) {
	t.Parallel()
	shanghai, err := domain.LoadTimezone("Asia/Shanghai")
	require.NoError(t, err)
	// 15:59:59 UTC is 23:59:59 in Shanghai; a second later a new local day starts.
	beforeMidnight := time.Date(2030, 3, 1, 15, 59, 59, 0, time.UTC)
	require.Equal(t, "2030-03-01", domain.LocalDay(beforeMidnight, shanghai))
	require.Equal(t, "2030-03-02", domain.LocalDay(beforeMidnight.Add(time.Second), shanghai), "a new local day")
	require.Equal(t, "2030-03-01", domain.LocalDay(beforeMidnight.Add(time.Second), time.UTC))

	require.Equal(t, "A007", domain.PickupCode("A", 7))
	require.Equal(t, "042", domain.PickupCode("", 42), "no prefix, zero-padded to three digits")
	require.Equal(t, "ZZ1235", domain.PickupCode("ZZ", 1235), "past 999 the number grows")
}

// An order's pickup code is recorded in its order.placed event, paid at
// placement or not, and the payment that follows keeps it.
func TestPickupCodeIsTheOrdersFromPlacement(t *testing.T) {
	t.Parallel()
	placed, err := domain.Place(domain.PlaceParams{
		OrderID: testID("o"), MerchantID: merchantID, CustomerID: "alice",
		Lines:           []domain.LineRequest{{ProductID: productID, Quantity: 1}},
		Products:        map[uuid.UUID]domain.ProductRef{productID: {ID: productID, MerchantID: merchantID, PriceCents: 450}},
		PaymentDeadline: t0.Add(deadline),
	}, t0)
	require.NoError(t, err)

	unpaid := domain.StampPickupCode(placed, "A001")
	require.Empty(t, placed[0].Data.(domain.OrderPlaced).PickupCode, "the events stamped are a copy")
	o := mustApply(t, domain.Order{}, unpaid...)
	require.Equal(t, "A001", o.PickupCode)
	require.Equal(t, domain.StatusAwaitingPayment, o.Status)
	events, _, err := domain.Pay(o, "ref", weighted(10, 0, 0), maxWait, t0.Add(time.Second))
	require.NoError(t, err)
	o = mustApply(t, o, events...)
	require.Equal(t, domain.StatusAccepted, o.Status)
	require.Equal(t, "A001", o.PickupCode, "payment keeps the code")

	paid, _, err := domain.PayAtPlacement(placed[0], "ref", weighted(10, 0, 0), maxWait, t0)
	require.NoError(t, err)
	paid = domain.StampPickupCode(paid, "A002")
	require.Equal(t, "A002", paid[0].Data.(domain.OrderAccepted).Placed.PickupCode, "an order accepted at once is numbered in the placement its one event carries")
	require.Equal(t, "A002", mustApply(t, domain.Order{}, paid...).PickupCode)

	// Orders paid while codes were issued at payment carry it in order.paid.
	legacy := mustApply(t, domain.Order{}, placed...)
	legacy = mustApply(t, legacy, domain.Event{Type: domain.EventOrderPaid, Data: domain.OrderPaid{PaymentRef: "ref", PaidAt: t0, PickupCode: "A003"}})
	require.Equal(t, "A003", legacy.PickupCode)

	// An order placed unpaid before codes were numbered at placement is
	// numbered by its payment, in order.paid; a numbered one is not again.
	old := mustApply(t, domain.Order{}, placed...)
	require.True(t, old.NeedsPickupCodeAtPayment())
	require.False(t, o.NeedsPickupCodeAtPayment())
	events, _, err = domain.Pay(old, "ref", weighted(10, 0, 0), maxWait, t0.Add(time.Second))
	require.NoError(t, err)
	events = domain.StampPickupCode(events, "A004")
	require.Equal(t, "A004", events[0].Data.(domain.OrderPaid).PickupCode)
	require.Equal(t, "A004", mustApply(t, old, events...).PickupCode)
}

func TestWhoMayChangeAMerchant(t *testing.T) {
	t.Parallel()
	merchantID := uuid.New()
	admin := domain.Party{Actor: domain.ActorAdmin, Subject: "ops"}
	own := domain.Party{Actor: domain.ActorMerchant, Subject: "kitchen", MerchantID: merchantID}
	other := domain.Party{Actor: domain.ActorMerchant, Subject: "kitchen", MerchantID: uuid.New()}
	customer := domain.Party{Actor: domain.ActorCustomer, Subject: "alice"}
	cases := []struct {
		party  domain.Party
		fields []string
		may    bool
	}{
		{admin, []string{"name", "capacity_unit", "timezone"}, true},
		{own, []string{"capacity"}, true},
		{own, []string{"capacity", "prep_seconds"}, false},
		{own, []string{"capacity_unit"}, false},
		{own, []string{"webhook_url"}, false},
		{other, []string{"capacity"}, false},
		{customer, []string{"capacity"}, false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.may, tc.party.MayChangeMerchantSettings(merchantID, tc.fields), "%+v %v", tc.party, tc.fields)
	}
	for _, p := range []domain.Party{admin, own} {
		require.True(t, p.MayPauseMerchant(merchantID))
		require.True(t, p.MayPrioritize(merchantID))
	}
	for _, p := range []domain.Party{other, customer} {
		require.False(t, p.MayPauseMerchant(merchantID))
		require.False(t, p.MayPrioritize(merchantID))
	}
}

func TestUnitsToWaitFor(t *testing.T) {
	t.Parallel()
	require.Equal(t, 3, domain.UnitsToWaitFor(2, 2, 2, 1), "every load 1, full kitchen: the position")
	require.Equal(t, 4, domain.UnitsToWaitFor(8, 10, 0, 6), "6 units need 4 more free")
	require.Equal(t, 1, domain.UnitsToWaitFor(0, 10, 0, 3), "at least 1 while waiting (paused)")
	require.Equal(t, 7, domain.UnitsToWaitFor(5, 20, 2, 30), "oversized waits for everything before it")
}

func TestChangeSettings(t *testing.T) {
	t.Parallel()
	// A Sunday morning in Paris, inside the period of 08:00-11:00.
	at := time.Date(2026, 3, 29, 6, 30, 0, 0, time.UTC)
	shop := domain.MerchantSettings{Name: "Tea", Capacity: 5, PrepSeconds: 60, MaxQueueWaitSeconds: 600,
		PaymentTimeoutSeconds: 300, Timezone: "Europe/Paris"}
	morning := []domain.Period{{Day: 0, Opens: "08:00", Closes: "11:00", Capacity: intp(8)}}
	with := func(f func(*domain.MerchantSettings)) domain.MerchantSettings {
		s := shop
		f(&s)
		return s
	}
	cases := []struct {
		name       string
		before     domain.MerchantSettings
		after      domain.MerchantSettings
		load       domain.Load
		code       domain.Code
		events     int
		period     bool
		admitsLine bool
	}{
		{"a raise admits the line", shop, with(func(s *domain.MerchantSettings) { s.Capacity = 7 }), weighted(5, 5, 5, 1, 1), "", 1, false, true},
		{"a raise with nobody waiting still asks the line", shop, with(func(s *domain.MerchantSettings) { s.Capacity = 7 }), weighted(5, 2, 2), "", 1, false, true},
		{"a fall evicts nobody", shop, with(func(s *domain.MerchantSettings) { s.Capacity = 2 }), weighted(5, 5, 5, 1), "", 1, false, false},
		{"another setting leaves the line", shop, with(func(s *domain.MerchantSettings) { s.PrepSeconds = 90 }), weighted(5, 5, 5, 1), "", 1, false, false},
		{"the same settings record nothing", shop, shop, weighted(5, 5, 5, 1), "", 0, false, false},
		{"defaults are the same settings", with(func(s *domain.MerchantSettings) { s.CapacityUnit = domain.UnitOrders }), shop, weighted(5, 5, 5), "", 0, false, false},
		{"hours opening a larger period now admit the line", shop, with(func(s *domain.MerchantSettings) { s.Hours = morning }), weighted(5, 5, 5, 1), "", 2, true, true},
		{"a raise under a period's capacity admits nobody", with(func(s *domain.MerchantSettings) { s.Hours = morning }),
			with(func(s *domain.MerchantSettings) { s.Hours, s.Capacity = morning, 7 }), weighted(8, 8, 8, 1), "", 1, false, false},
		{"hours closing the period fall back to the own capacity", with(func(s *domain.MerchantSettings) { s.Hours = morning }),
			with(func(s *domain.MerchantSettings) { s.Capacity = 9 }), weighted(8, 8, 8, 1), "", 2, true, true},
		{"an invalid capacity is refused", shop, with(func(s *domain.MerchantSettings) { s.Capacity = -1 }), weighted(5, 0, 0), domain.CodeValidation, 0, false, false},
		{"the unit changes only while idle", shop, with(func(s *domain.MerchantSettings) { s.CapacityUnit = domain.UnitItems }), weighted(5, 1, 1), domain.CodeConflict, 0, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := domain.Merchant{ID: merchantID, Settings: c.before}
			period, err := domain.PeriodChange(m, at)
			require.NoError(t, err)
			m = mustApplyMerchant(t, m, period...)
			change, err := domain.ChangeSettings(m, c.after, c.load, at)
			if c.code != "" {
				require.Equal(t, c.code, domain.ErrorCode(err))
				return
			}
			require.NoError(t, err)
			require.Len(t, change.Events, c.events)
			require.Equal(t, c.period, len(change.Period) > 0)
			require.Equal(t, c.admitsLine, change.AdmitsLine)
			if c.events > 0 {
				updated := mustApplyMerchant(t, m, change.Events...)
				require.Equal(t, c.after.Capacity, updated.Settings.Capacity)
			}
		})
	}
}

func mustApplyMerchant(t *testing.T, m domain.Merchant, events ...domain.Event) domain.Merchant {
	t.Helper()
	m, err := m.Apply(events...)
	require.NoError(t, err)
	return m
}
