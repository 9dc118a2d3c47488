package domain

import (
	"fmt"
	"sort"
	"time"
)

// SlotSettings publish a merchant's pickup slots: a slot every Minutes
// within opening hours, each taking up to Capacity units (the merchant's
// capacity unit), from LeadMinutes after now to HorizonDays ahead.
type SlotSettings struct {
	Minutes     int `json:"minutes"`
	Capacity    int `json:"capacity"`
	LeadMinutes int `json:"lead_minutes"`
	HorizonDays int `json:"horizon_days"`
}

// Slot settings limits.
const (
	MinSlotMinutes  = 5
	MaxSlotMinutes  = 60
	MaxSlotCapacity = 10_000
	MaxLeadMinutes  = 1440
	MaxHorizonDays  = 14
	MaxPeriods      = 70
)

// Validate checks every field of the slot settings.
func (s SlotSettings) Validate() error {
	for _, f := range []struct {
		name     string
		v, lo, h int
	}{
		{"slots.minutes", s.Minutes, MinSlotMinutes, MaxSlotMinutes},
		{"slots.capacity", s.Capacity, 1, MaxSlotCapacity},
		{"slots.lead_minutes", s.LeadMinutes, 0, MaxLeadMinutes},
		{"slots.horizon_days", s.HorizonDays, 1, MaxHorizonDays},
	} {
		if f.v < f.lo || f.v > f.h {
			return Errorf(CodeValidation, "%s must be between %d and %d", f.name, f.lo, f.h)
		}
	}
	return nil
}

// Period is a span of opening hours on a day of the week (0 = Sunday), in
// the merchant's time zone, from Opens to Closes ("HH:MM", Closes up to
// "24:00"); Capacity, when set, replaces the merchant's capacity while it
// is open.
type Period struct {
	Day      int    `json:"day"`
	Opens    string `json:"opens"`
	Closes   string `json:"closes"`
	Capacity *int   `json:"capacity,omitempty"`
}

// clockMinutes reads "HH:MM" as minutes after midnight; "24:00" is the end
// of the day, allowed only where end says so.
func clockMinutes(s string, end bool) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	var h, m int
	for _, c := range []struct {
		dst  *int
		text string
	}{{&h, s[:2]}, {&m, s[3:]}} {
		for _, r := range c.text {
			if r < '0' || r > '9' {
				return 0, false
			}
			*c.dst = *c.dst*10 + int(r-'0')
		}
	}
	if m > 59 || h > 24 || (h == 24 && (m != 0 || !end)) {
		return 0, false
	}
	return h*60 + m, true
}

// span is a period's opening and closing minutes of its day.
func (p Period) span() (opens, closes int) {
	opens, _ = clockMinutes(p.Opens, false)
	closes, _ = clockMinutes(p.Closes, true)
	return opens, closes
}

// ValidateHours checks opening hours: known days, well-formed times, every
// period closing after it opens, no two periods of a day overlapping.
func ValidateHours(hours []Period) error {
	if len(hours) > MaxPeriods {
		return Errorf(CodeValidation, "hours must have at most %d periods", MaxPeriods)
	}
	for i, p := range hours {
		if p.Day < 0 || p.Day > 6 {
			return Errorf(CodeValidation, "hours[%d].day must be between 0 (Sunday) and 6", i)
		}
		opens, ok := clockMinutes(p.Opens, false)
		if !ok {
			return Errorf(CodeValidation, `hours[%d].opens must be a time "HH:MM" from 00:00 to 23:59`, i)
		}
		closes, ok := clockMinutes(p.Closes, true)
		if !ok {
			return Errorf(CodeValidation, `hours[%d].closes must be a time "HH:MM" from 00:00 to 24:00`, i)
		}
		if closes <= opens {
			return Errorf(CodeValidation, "hours[%d].closes must be after hours[%d].opens", i, i)
		}
		if p.Capacity != nil && (*p.Capacity < 0 || *p.Capacity > MaxCapacity) {
			return Errorf(CodeValidation, "hours[%d].capacity must be between 0 and %d", i, MaxCapacity)
		}
	}
	order := make([]int, len(hours))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		pa, pb := hours[order[a]], hours[order[b]]
		oa, _ := pa.span()
		ob, _ := pb.span()
		return pa.Day < pb.Day || (pa.Day == pb.Day && oa < ob)
	})
	for k := 1; k < len(order); k++ {
		prev, cur := hours[order[k-1]], hours[order[k]]
		_, prevCloses := prev.span()
		curOpens, _ := cur.span()
		if prev.Day == cur.Day && curOpens < prevCloses {
			return Errorf(CodeValidation, "hours[%d] overlaps hours[%d]", order[k], order[k-1])
		}
	}
	return nil
}

// OpenPeriod is the period of hours open at t in loc. A merchant without
// hours is always open (the zero Period).
func OpenPeriod(hours []Period, loc *time.Location, t time.Time) (Period, bool) {
	if len(hours) == 0 {
		return Period{}, true
	}
	local := t.In(loc)
	day, minute := int(local.Weekday()), local.Hour()*60+local.Minute()
	for _, p := range hours {
		opens, closes := p.span()
		if p.Day == day && opens <= minute && minute < closes {
			return p, true
		}
	}
	return Period{}, false
}

// wallClock is the instant of minute (0-1440) of the local date of day in
// loc, and whether that wall-clock time exists there (not skipped by a
// daylight saving change).
func wallClock(day time.Time, minute int, loc *time.Location) (time.Time, bool) {
	y, m, d := day.Date()
	t := time.Date(y, m, d, minute/60, minute%60, 0, 0, loc)
	if minute == 24*60 {
		return t, true
	}
	return t, t.Hour() == minute/60 && t.Minute() == minute%60
}

// NextEdge is the first instant after t at which a period opens or closes,
// the moment the capacity in force or being open may change; false when
// there are no hours.
func NextEdge(hours []Period, loc *time.Location, t time.Time) (time.Time, bool) {
	if len(hours) == 0 {
		return time.Time{}, false
	}
	local := t.In(loc)
	var next time.Time
	for d := -1; d <= 8; d++ {
		day := time.Date(local.Year(), local.Month(), local.Day()+d, 12, 0, 0, 0, loc)
		for _, p := range hours {
			if p.Day != int(day.Weekday()) {
				continue
			}
			opens, closes := p.span()
			for _, minute := range []int{opens, closes} {
				edge, _ := wallClock(day, minute, loc)
				if edge.After(t) && (next.IsZero() || edge.Before(next)) {
					next = edge
				}
			}
		}
	}
	return next, !next.IsZero()
}

// CapacityInForce is the capacity that admits orders at t: the open
// period's when it sets one, else the merchant's own.
func CapacityInForce(s MerchantSettings, loc *time.Location, t time.Time) int {
	if p, open := OpenPeriod(s.Hours, loc, t); open && p.Capacity != nil {
		return *p.Capacity
	}
	return s.Capacity
}

// PeriodCapacity is the capacity the open period at t sets, nil when none
// does (closed, no hours, or a period without one).
func PeriodCapacity(hours []Period, loc *time.Location, t time.Time) *int {
	if p, open := OpenPeriod(hours, loc, t); open && p.Capacity != nil {
		c := *p.Capacity
		return &c
	}
	return nil
}

// CheckOpen refuses an order for as soon as possible while the merchant is
// closed, saying when it opens if it does within a week.
func CheckOpen(s MerchantSettings, loc *time.Location, now time.Time) error {
	if _, open := OpenPeriod(s.Hours, loc, now); open {
		return nil
	}
	e := Errorf(CodeMerchantClosed, "the merchant is closed")
	t := now
	for range 2 * MaxPeriods {
		edge, ok := NextEdge(s.Hours, loc, t)
		if !ok {
			break
		}
		if _, open := OpenPeriod(s.Hours, loc, edge); open {
			e.Message = fmt.Sprintf("the merchant is closed until %s", edge.UTC().Format(time.RFC3339))
			e.RetryAfter = edge.Sub(now)
			break
		}
		t = edge
	}
	return e
}

// PublishedSlots are the starts of the pickup slots of a local date
// ("YYYY-MM-DD" in loc), in time order: every slot.Minutes from the opening
// of each period (or of the day, without hours) that ends by the period's
// close, at least lead_minutes after now and less than horizon_days ahead.
// A wall-clock time a daylight saving change skips has no slot.
func PublishedSlots(s MerchantSettings, loc *time.Location, date string, now time.Time) ([]time.Time, error) {
	day, err := time.ParseInLocation(time.DateOnly, date, loc)
	if err != nil {
		return nil, Errorf(CodeValidation, "date must be a date YYYY-MM-DD")
	}
	if s.Slots == nil {
		return nil, nil
	}
	periods := s.Hours
	if len(periods) == 0 {
		periods = []Period{{Day: int(day.Weekday()), Opens: "00:00", Closes: "24:00"}}
	}
	earliest := now.Add(time.Duration(s.Slots.LeadMinutes) * time.Minute)
	horizon := now.Add(time.Duration(s.Slots.HorizonDays) * 24 * time.Hour)
	var starts []time.Time
	for _, p := range periods {
		if p.Day != int(day.Weekday()) {
			continue
		}
		opens, closes := p.span()
		for minute := opens; minute+s.Slots.Minutes <= closes; minute += s.Slots.Minutes {
			start, ok := wallClock(day, minute, loc)
			if ok && !start.Before(earliest) && start.Before(horizon) {
				starts = append(starts, start.UTC())
			}
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	return starts, nil
}

// CheckPickup refuses a pickup_at that is not one of the merchant's
// published slots at now, saying why.
func CheckPickup(s MerchantSettings, loc *time.Location, pickupAt, now time.Time) error {
	if s.Slots == nil {
		return Errorf(CodeValidation, "pickup_at: this merchant publishes no pickup slots")
	}
	if pickupAt.Before(now.Add(time.Duration(s.Slots.LeadMinutes) * time.Minute)) {
		return Errorf(CodeValidation, "pickup_at must be at least %d minutes from now", s.Slots.LeadMinutes)
	}
	if !pickupAt.Before(now.Add(time.Duration(s.Slots.HorizonDays) * 24 * time.Hour)) {
		return Errorf(CodeValidation, "pickup_at must be within %d days", s.Slots.HorizonDays)
	}
	if isSlotStart(s, loc, pickupAt) {
		return nil
	}
	return Errorf(CodeValidation, "pickup_at is not the start of a published pickup slot (within opening hours, every %d minutes)", s.Slots.Minutes)
}

// isSlotStart says whether t starts a slot PublishedSlots lists for t's
// local date, leaving lead and horizon aside. It looks only at the periods
// of that date instead of listing every slot of the day: every placement
// for a slot asks, inside its merchant's batch.
func isSlotStart(s MerchantSettings, loc *time.Location, t time.Time) bool {
	local := t.In(loc)
	minute := local.Hour()*60 + local.Minute()
	periods := s.Hours
	if len(periods) == 0 {
		periods = []Period{{Day: int(local.Weekday()), Opens: "00:00", Closes: "24:00"}}
	}
	for _, p := range periods {
		if p.Day != int(local.Weekday()) {
			continue
		}
		opens, closes := p.span()
		if minute < opens || minute+s.Slots.Minutes > closes || (minute-opens)%s.Slots.Minutes != 0 {
			continue
		}
		// The same wall-clock minute the day's list makes: one a daylight
		// saving change skips has no slot, and of a minute that happens
		// twice only the instant time.Date gives is one.
		start, ok := wallClock(local, minute, loc)
		return ok && start.Equal(t)
	}
	return false
}

// CheckPlacementTime decides whether an order may be placed at now: for
// as soon as possible only while the merchant is open, for a pickup slot
// only at a published one (a shop takes orders ahead while closed).
func CheckPlacementTime(s MerchantSettings, loc *time.Location, pickupAt *time.Time, now time.Time) error {
	if pickupAt == nil {
		return CheckOpen(s, loc, now)
	}
	return CheckPickup(s, loc, *pickupAt, now)
}

// ReleaseAt is when the orders of the slot starting at pickupAt join the
// live line: prepSeconds before it, for the kitchen to make them by then.
func ReleaseAt(pickupAt time.Time, prepSeconds int) time.Time {
	return pickupAt.Add(-time.Duration(prepSeconds) * time.Second)
}

// FitSlots decides which requests for pickup slots get room, in arrival
// order: each takes its load of what is left of its slot where the load
// still fits, so a smaller request may take room a larger one before it
// could not. room holds what is left of each slot and is taken from.
func FitSlots[K comparable](room map[K]int, slots []K, loads []int) []bool {
	fits := make([]bool, len(slots))
	for i, k := range slots {
		if loads[i] <= room[k] {
			room[k] -= loads[i]
			fits[i] = true
		}
	}
	return fits
}

// KnownFullSlot is what a process remembers of a slot it saw with no room
// left: the settings its merchant had then, at their version, so that a
// later request's pickup_at can be checked as its batch would check it.
type KnownFullSlot struct {
	Settings        MerchantSettings
	Location        *time.Location
	MerchantVersion int
}

// SlotSeen is a slot as one read saw it, taken after the request asking
// about it arrived: its room, its merchant's version, and whether the
// request's idempotency key was already recorded.
type SlotSeen struct {
	Room            int
	MerchantVersion int
	KeyRecorded     bool
}

// RefuseKnownFull decides a request for a slot known full without its
// merchant's batch: it returns the slot_full refusal only when the read
// shows the slot with no room (every load weighs at least one), which is
// then true at a moment of the request whoever freed room before or after,
// the merchant's settings unchanged since the slot was known full and
// pickup_at still published at now, and no earlier request with the
// same key, whose replay only the batch answers. Otherwise it returns nil:
// the batch decides, and a slot with room is never refused from memory.
func RefuseKnownFull(known KnownFullSlot, seen SlotSeen, pickupAt, now time.Time) error {
	if seen.Room > 0 || seen.KeyRecorded || seen.MerchantVersion != known.MerchantVersion {
		return nil
	}
	if CheckPickup(known.Settings, known.Location, pickupAt, now) != nil {
		return nil
	}
	return SlotFullError(pickupAt)
}

// SlotReturn is the room of its pickup slot an order gives back when a
// command takes it from a status that holds the slot to one that does not
// (OrderStatus.HoldsSlot), whichever command ended it: its load at its
// pickup time. ok is false for an order
// without a slot, a new one, and a change that keeps the slot or never
// held it.
func SlotReturn(before, after Order) (at time.Time, load int, ok bool) {
	if after.PickupAt == nil || before.Version == 0 || !before.Status.HoldsSlot() || after.Status.HoldsSlot() {
		return time.Time{}, 0, false
	}
	return *after.PickupAt, after.load(), true
}

// SlotFullError refuses an order whose load no longer fits its slot.
func SlotFullError(pickupAt time.Time) *Error {
	return Errorf(CodeSlotFull, "the pickup slot at %s is full", pickupAt.UTC().Format(time.RFC3339))
}

// OrderScheduled records that a paid order for a pickup slot waits for its
// release; Seq is its place in the live line, taken at payment, so that at
// the release it goes ahead of every order paid after it.
type OrderScheduled struct {
	Seq         int64     `json:"seq"`
	ScheduledAt time.Time `json:"scheduled_at"`
	ReleaseAt   time.Time `json:"release_at"`
}

// EventOrderScheduled is the event of OrderScheduled.
const EventOrderScheduled = "order.scheduled"

// schedule decides for a newly paid order of a pickup slot whose release
// has not come: it waits apart from the live line, with its place in it.
func schedule(o Order, load Load, now time.Time) (Event, Load, bool) {
	if o.ReleaseAt == nil || !now.Before(*o.ReleaseAt) {
		return Event{}, load, false
	}
	seq := max(load.NextSeq, 1)
	load.NextSeq = seq + 1
	return Event{Type: EventOrderScheduled, Data: OrderScheduled{Seq: seq, ScheduledAt: now, ReleaseAt: *o.ReleaseAt}}, load, true
}

// Release lets a scheduled order whose release has come into the live
// line, at the place it took when paid: queued, for the drain that follows
// to admit in line order. Before its release, or for an order not
// scheduled, it does nothing.
func Release(o Order, load Load, maxQueueWait time.Duration, now time.Time) ([]Event, Load) {
	if o.Status != StatusScheduled || o.ReleaseAt == nil || now.Before(*o.ReleaseAt) {
		return nil, load
	}
	e := Event{Type: EventOrderQueued, Data: OrderQueued{
		Seq: o.QueueSeq, QueuedAt: now, ExpiresAt: now.Add(maxQueueWait),
		Active: load.Active, Capacity: load.Capacity, Queued: load.Queued, Lane: laneField(o.laneOrNormal()),
		Released: true,
	}}
	return []Event{e}, load.enqueue(o)
}

// MerchantPeriodChanged records the capacity in force changing at the edge
// of a period of opening hours (or with a change of them): Capacity is the
// open period's, nil for the merchant's own; NextEdge is the next moment it
// may change, when its timer fires.
type MerchantPeriodChanged struct {
	Capacity  *int       `json:"capacity,omitempty"`
	NextEdge  *time.Time `json:"next_edge,omitempty"`
	ChangedAt time.Time  `json:"changed_at"`
}

// EventMerchantPeriodChanged is the event of MerchantPeriodChanged.
const EventMerchantPeriodChanged = "merchant.period_changed"

// PeriodChange is the period edge's decision at now: the capacity the
// open period sets and the next edge, recorded when either differs from
// what m holds. It runs at the edge's timer and after a change of hours,
// and is right at any time, so a late or repeated timer is harmless.
func PeriodChange(m Merchant, now time.Time) ([]Event, error) {
	s := m.Settings.WithDefaults()
	loc, err := LoadTimezone(s.Timezone)
	if err != nil {
		return nil, err
	}
	capacity := PeriodCapacity(s.Hours, loc, now)
	var next *time.Time
	if edge, ok := NextEdge(s.Hours, loc, now); ok {
		e := edge.UTC()
		next = &e
	}
	if equalIntPtr(capacity, m.PeriodCapacity) && equalTimePtr(next, m.NextEdge) {
		return nil, nil
	}
	return []Event{{Type: EventMerchantPeriodChanged, Data: MerchantPeriodChanged{Capacity: capacity, NextEdge: next, ChangedAt: now}}}, nil
}

// AdmitsLine reports whether a change of a merchant from before to after
// (its settings, or its period at an edge) admits its line at once: the
// capacity in force rose. A fall evicts nobody: the orders accepted stay,
// and active may stay above the capacity until they complete.
func AdmitsLine(before, after Merchant) bool {
	return after.CapacityInForce() > before.CapacityInForce()
}

func equalIntPtr(a, b *int) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func equalTimePtr(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}
