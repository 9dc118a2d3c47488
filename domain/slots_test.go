package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

func paris(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	return loc
}

func intp(n int) *int { return &n }

func TestValidateHours(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		hours []domain.Period
		msg   string
	}{
		{"none", nil, ""},
		{"two periods a day", []domain.Period{{Day: 1, Opens: "07:00", Closes: "11:00"}, {Day: 1, Opens: "11:00", Closes: "24:00", Capacity: intp(3)}}, ""},
		{"unknown day", []domain.Period{{Day: 7, Opens: "07:00", Closes: "11:00"}}, "hours[0].day"},
		{"malformed", []domain.Period{{Day: 1, Opens: "7:00", Closes: "11:00"}}, "hours[0].opens"},
		{"minutes past 59", []domain.Period{{Day: 1, Opens: "07:60", Closes: "11:00"}}, "hours[0].opens"},
		{"opens at 24:00", []domain.Period{{Day: 1, Opens: "24:00", Closes: "24:00"}}, "hours[0].opens"},
		{"past the day", []domain.Period{{Day: 1, Opens: "07:00", Closes: "24:30"}}, "hours[0].closes"},
		{"closes before it opens", []domain.Period{{Day: 2, Opens: "18:00", Closes: "02:00"}}, "hours[0].closes must be after"},
		{"empty", []domain.Period{{Day: 2, Opens: "18:00", Closes: "18:00"}}, "hours[0].closes must be after"},
		{"overlap", []domain.Period{{Day: 3, Opens: "12:00", Closes: "15:00"}, {Day: 3, Opens: "08:00", Closes: "12:30"}}, "hours[0] overlaps hours[1]"},
		{"same hours on other days", []domain.Period{{Day: 3, Opens: "08:00", Closes: "12:30"}, {Day: 4, Opens: "08:00", Closes: "12:30"}}, ""},
		{"capacity", []domain.Period{{Day: 1, Opens: "07:00", Closes: "11:00", Capacity: intp(-1)}}, "hours[0].capacity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := domain.ValidateHours(c.hours)
			if c.msg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation})
			require.Contains(t, domain.ErrorMessage(err), c.msg)
		})
	}
}

func TestSlotSettingsBounds(t *testing.T) {
	t.Parallel()
	ok := domain.SlotSettings{Minutes: 15, Capacity: 20, LeadMinutes: 30, HorizonDays: 7}
	require.NoError(t, ok.Validate())
	for name, s := range map[string]domain.SlotSettings{
		"slots.minutes":      {Minutes: 4, Capacity: 20, HorizonDays: 1},
		"slots.capacity":     {Minutes: 15, Capacity: 0, HorizonDays: 1},
		"slots.lead_minutes": {Minutes: 15, Capacity: 20, LeadMinutes: 1441, HorizonDays: 1},
		"slots.horizon_days": {Minutes: 15, Capacity: 20, HorizonDays: 15},
	} {
		require.ErrorContains(t, s.Validate(), name)
	}
}

// Paris springs forward on 2026-03-29 (02:00 becomes 03:00) and falls back
// on 2026-10-25 (03:00 becomes 02:00).
func TestOpenPeriodFollowsTheLocalClockAcrossDST(t *testing.T) {
	t.Parallel()
	loc := paris(t)
	hours := []domain.Period{{Day: 0, Opens: "08:00", Closes: "12:00", Capacity: intp(2)}, {Day: 6, Opens: "08:00", Closes: "12:00"}}
	for _, c := range []struct {
		name string
		at   time.Time
		open bool
	}{
		{"saturday 08:00 CET is 07:00 UTC", time.Date(2026, 3, 28, 7, 0, 0, 0, time.UTC), true},
		{"saturday 07:59 CET", time.Date(2026, 3, 28, 6, 59, 0, 0, time.UTC), false},
		{"sunday 08:00 CEST is 06:00 UTC", time.Date(2026, 3, 29, 6, 0, 0, 0, time.UTC), true},
		{"sunday 07:00 UTC is 09:00 CEST", time.Date(2026, 3, 29, 7, 0, 0, 0, time.UTC), true},
		{"sunday 05:59 UTC is 07:59 CEST", time.Date(2026, 3, 29, 5, 59, 0, 0, time.UTC), false},
		{"sunday 12:00 CEST closes", time.Date(2026, 3, 29, 10, 0, 0, 0, time.UTC), false},
		{"after fall back, 08:00 CET is 07:00 UTC", time.Date(2026, 10, 25, 7, 0, 0, 0, time.UTC), true},
		{"after fall back, 06:30 UTC is 07:30 CET", time.Date(2026, 10, 25, 6, 30, 0, 0, time.UTC), false},
		{"monday", time.Date(2026, 3, 30, 9, 0, 0, 0, time.UTC), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, open := domain.OpenPeriod(hours, loc, c.at)
			require.Equal(t, c.open, open)
		})
	}
	_, open := domain.OpenPeriod(nil, loc, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC))
	require.True(t, open, "no hours: always open")
}

func TestNextEdgeAndCapacityInForce(t *testing.T) {
	t.Parallel()
	loc := paris(t)
	s := domain.MerchantSettings{Capacity: 5, Hours: []domain.Period{
		{Day: 0, Opens: "08:00", Closes: "11:00", Capacity: intp(2)}, {Day: 0, Opens: "11:00", Closes: "14:00"},
	}}
	// Sunday 2026-03-29, after the spring change: CEST, UTC+2.
	for _, c := range []struct {
		name     string
		at, next time.Time
		capacity int
		period   *int
	}{
		{"before opening", time.Date(2026, 3, 29, 5, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 6, 0, 0, 0, time.UTC), 5, nil},
		{"morning period", time.Date(2026, 3, 29, 6, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 9, 0, 0, 0, time.UTC), 2, intp(2)},
		{"lunch period", time.Date(2026, 3, 29, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC), 5, nil},
		{"closed until next sunday, CEST", time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC), time.Date(2026, 4, 5, 6, 0, 0, 0, time.UTC), 5, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, ok := domain.NextEdge(s.Hours, loc, c.at)
			require.True(t, ok)
			require.Equal(t, c.next, next.UTC())
			require.Equal(t, c.capacity, domain.CapacityInForce(s, loc, c.at))
			require.Equal(t, c.period, domain.PeriodCapacity(s.Hours, loc, c.at))
		})
	}
	_, ok := domain.NextEdge(nil, loc, time.Now())
	require.False(t, ok, "no hours, no edges")
}

func TestPeriodChangeRecordsOnlyAChange(t *testing.T) {
	t.Parallel()
	m := domain.Merchant{ID: merchantID, Settings: domain.MerchantSettings{Name: "Tea", Capacity: 5, Timezone: "Europe/Paris",
		Hours: []domain.Period{{Day: 0, Opens: "08:00", Closes: "11:00", Capacity: intp(2)}}}}
	at := time.Date(2026, 3, 29, 6, 30, 0, 0, time.UTC)
	events, err := domain.PeriodChange(m, at)
	require.NoError(t, err)
	require.Len(t, events, 1)
	m, err = m.Apply(events...)
	require.NoError(t, err)
	require.Equal(t, 2, m.CapacityInForce())
	require.Equal(t, time.Date(2026, 3, 29, 9, 0, 0, 0, time.UTC), *m.NextEdge)
	again, err := domain.PeriodChange(m, at.Add(time.Hour))
	require.NoError(t, err)
	require.Empty(t, again, "a repeated or early timer changes nothing")
	events, err = domain.PeriodChange(m, *m.NextEdge)
	require.NoError(t, err)
	m, err = m.Apply(events...)
	require.NoError(t, err)
	require.Equal(t, 5, m.CapacityInForce(), "the period's end brings back the merchant's own capacity")
}

func TestCheckOpen(t *testing.T) {
	t.Parallel()
	loc := paris(t)
	s := domain.MerchantSettings{Hours: []domain.Period{{Day: 1, Opens: "08:00", Closes: "12:00"}}}
	monday9 := time.Date(2026, 9, 28, 7, 0, 0, 0, time.UTC) // 09:00 CEST
	require.NoError(t, domain.CheckOpen(s, loc, monday9))
	require.NoError(t, domain.CheckOpen(domain.MerchantSettings{}, loc, monday9), "no hours: always open")
	err := domain.CheckOpen(s, loc, monday9.Add(4*time.Hour))
	require.ErrorIs(t, err, domain.ErrMerchantClosed)
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, 7*24*time.Hour-4*time.Hour-time.Hour, de.RetryAfter, "opens next monday 08:00")
	require.Contains(t, de.Message, "2026-10-05T06:00:00Z")
}

func TestPublishedSlots(t *testing.T) {
	t.Parallel()
	loc := paris(t)
	slots := &domain.SlotSettings{Minutes: 30, Capacity: 20, LeadMinutes: 60, HorizonDays: 2}
	s := domain.MerchantSettings{Slots: slots, Hours: []domain.Period{
		{Day: 0, Opens: "01:00", Closes: "04:00"}, {Day: 1, Opens: "08:00", Closes: "09:45"}, {Day: 1, Opens: "07:00", Closes: "07:30"},
	}}
	utc := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) }
	for _, c := range []struct {
		name string
		date string
		now  time.Time
		want []time.Time
	}{
		// 01:00 and 01:30 CET, then 02:00 and 02:30 do not exist, then
		// 03:00 and 03:30 CEST.
		{"spring forward skips the missing hour", "2026-03-29", utc(27, 12, 0),
			[]time.Time{utc(29, 0, 0), utc(29, 0, 30), utc(29, 1, 0), utc(29, 1, 30)}},
		{"periods in time order, last slot ends by closing", "2026-03-30", utc(29, 6, 0),
			[]time.Time{utc(30, 5, 0), utc(30, 6, 0), utc(30, 6, 30), utc(30, 7, 0)}},
		{"lead time", "2026-03-30", utc(30, 4, 30),
			[]time.Time{utc(30, 6, 0), utc(30, 6, 30), utc(30, 7, 0)}},
		{"beyond the horizon", "2026-03-30", utc(28, 6, 0), []time.Time{utc(30, 5, 0)}},
		{"closed day", "2026-03-31", utc(30, 0, 0), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := domain.PublishedSlots(s, loc, c.date, c.now)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
	_, err := domain.PublishedSlots(s, loc, "30/03/2026", utc(29, 0, 0))
	require.ErrorContains(t, err, "date")
	none, err := domain.PublishedSlots(domain.MerchantSettings{}, loc, "2026-03-30", utc(29, 0, 0))
	require.NoError(t, err)
	require.Empty(t, none, "no slot settings, no slots")
	allDay, err := domain.PublishedSlots(domain.MerchantSettings{Slots: &domain.SlotSettings{Minutes: 60, Capacity: 1, HorizonDays: 3}}, time.UTC, "2026-03-30", utc(29, 0, 0))
	require.NoError(t, err)
	require.Len(t, allDay, 24, "without hours, slots run all day")
}

func TestCheckPickup(t *testing.T) {
	t.Parallel()
	loc := paris(t)
	s := domain.MerchantSettings{Slots: &domain.SlotSettings{Minutes: 15, Capacity: 20, LeadMinutes: 30, HorizonDays: 1},
		Hours: []domain.Period{{Day: 3, Opens: "08:00", Closes: "12:00"}}}
	now := time.Date(2026, 9, 30, 6, 0, 0, 0, time.UTC) // Wednesday 08:00 CEST
	for _, c := range []struct {
		name string
		at   time.Time
		msg  string
	}{
		{"a published slot", now.Add(time.Hour), ""},
		{"past", now.Add(-15 * time.Minute), "at least 30 minutes"},
		{"inside the lead time", now.Add(15 * time.Minute), "at least 30 minutes"},
		{"off the grid", now.Add(time.Hour + 5*time.Minute), "not the start of a published pickup slot"},
		{"after closing", now.Add(4 * time.Hour), "not the start of a published pickup slot"},
		{"the last slot ends at closing", now.Add(3*time.Hour + 45*time.Minute), ""},
		{"beyond the horizon", now.Add(7 * 24 * time.Hour), "within 1 days"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := domain.CheckPickup(s, loc, c.at, now)
			if c.msg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation})
			require.Contains(t, domain.ErrorMessage(err), "pickup_at")
			require.Contains(t, domain.ErrorMessage(err), c.msg)
		})
	}
	err := domain.CheckPickup(domain.MerchantSettings{}, loc, now.Add(time.Hour), now)
	require.ErrorContains(t, err, "pickup_at: this merchant publishes no pickup slots")
	beforeOpening := now.Add(-time.Hour)
	require.NoError(t, domain.CheckPlacementTime(s, loc, ptrTime(now.Add(time.Hour)), beforeOpening),
		"a slot is taken ahead while the shop is closed")
	require.ErrorIs(t, domain.CheckPlacementTime(s, loc, nil, beforeOpening), domain.ErrMerchantClosed)
}

func ptrTime(t time.Time) *time.Time { return &t }

// TestCheckPickupAgreesWithThePublishedList holds the check of one instant
// against the list of the day's slots it stands for: every instant of days
// with daylight saving changes (a skipped hour, a repeated one, a half-hour
// shift), on and off the grid, in periods that cover the change or stop
// short of it.
func TestCheckPickupAgreesWithThePublishedList(t *testing.T) {
	t.Parallel()
	hours := []domain.Period{
		{Day: 0, Opens: "00:00", Closes: "24:00"},
		{Day: 1, Opens: "01:30", Closes: "03:30"}, {Day: 1, Opens: "11:00", Closes: "14:10"},
		{Day: 6, Opens: "01:00", Closes: "04:00"}, {Day: 6, Opens: "22:00", Closes: "24:00"},
	}
	days := []struct{ zone, date string }{
		{"Europe/Paris", "2026-03-29"}, {"Europe/Paris", "2026-10-25"},
		{"America/New_York", "2026-03-08"}, {"America/New_York", "2026-11-01"},
		{"Australia/Lord_Howe", "2026-04-05"}, {"Australia/Lord_Howe", "2026-10-04"},
		{"Asia/Kolkata", "2026-06-15"}, {"America/Sao_Paulo", "2026-07-04"},
	}
	checked := 0
	for _, d := range days {
		loc, err := time.LoadLocation(d.zone)
		require.NoError(t, err)
		day, err := time.ParseInLocation(time.DateOnly, d.date, loc)
		require.NoError(t, err)
		now := day.Add(-12 * time.Hour)
		for _, minutes := range []int{15, 20, 45, 60} {
			for _, withHours := range []bool{false, true} {
				s := domain.MerchantSettings{Slots: &domain.SlotSettings{Minutes: minutes, Capacity: 5, LeadMinutes: 10, HorizonDays: 3}}
				if withHours {
					s.Hours = hours
				}
				for at := day.Add(-2 * time.Hour); at.Before(day.Add(26 * time.Hour)); at = at.Add(5 * time.Minute) {
					for _, instant := range []time.Time{at, at.Add(time.Second)} {
						published, err := domain.PublishedSlots(s, loc, instant.In(loc).Format(time.DateOnly), now)
						require.NoError(t, err)
						listed := false
						for _, st := range published {
							listed = listed || st.Equal(instant)
						}
						err = domain.CheckPickup(s, loc, instant, now)
						require.Equal(t, listed, err == nil, "%s %s, %d-minute slots, hours %v: listed %v, check says %v",
							d.zone, instant.In(loc).Format(time.RFC3339), minutes, withHours, listed, err)
						checked++
					}
				}
			}
		}
	}
	require.Greater(t, checked, 10000)
}

// scheduledOrder places an unpaid order for the slot at pickup.
func scheduledOrder(t *testing.T, id string, pickup time.Time, prep int) domain.Order {
	t.Helper()
	events, err := domain.Place(domain.PlaceParams{
		OrderID: testID(id), MerchantID: merchantID, CustomerID: "alice",
		Lines: []domain.LineRequest{{ProductID: productID, Quantity: 1}}, Products: products(),
		PaymentDeadline: t0.Add(deadline), PickupAt: &pickup, PrepSeconds: prep,
	}, t0)
	require.NoError(t, err)
	return mustApply(t, domain.Order{}, events...)
}

func TestPlaceForASlotFixesItsRelease(t *testing.T) {
	t.Parallel()
	o := scheduledOrder(t, "o1", t0.Add(2*time.Hour), 300)
	require.Equal(t, t0.Add(2*time.Hour), *o.PickupAt)
	require.Equal(t, t0.Add(2*time.Hour-5*time.Minute), *o.ReleaseAt)
	require.Equal(t, domain.ReleaseAt(t0.Add(2*time.Hour), 300), *o.ReleaseAt)
}

func TestPaidBeforeReleaseIsScheduledAndKeepsItsPlace(t *testing.T) {
	t.Parallel()
	load := domain.Load{Capacity: 1, NextSeq: 4}
	o := scheduledOrder(t, "o1", t0.Add(time.Hour), 600)
	events, after, err := domain.Pay(o, "ref", load, maxWait, t0)
	require.NoError(t, err)
	o = mustApply(t, o, events...)
	require.Equal(t, domain.StatusScheduled, o.Status)
	require.EqualValues(t, 4, o.QueueSeq, "its place in the live line is taken when it is paid")
	require.Equal(t, domain.Load{Capacity: 1, NextSeq: 5}, after, "it holds no live capacity and is not in the line")

	// An order paid later, while the kitchen is full, queues behind it.
	after.Active = 1
	later := placeOne(t, "o2")
	later, after = payOne(t, later, after, t0.Add(time.Minute))
	require.Equal(t, domain.StatusQueued, later.Status)
	require.Greater(t, later.QueueSeq, o.QueueSeq)

	early, unchanged := domain.Release(o, after, maxWait, o.ReleaseAt.Add(-time.Second))
	require.Empty(t, early, "not before its release")
	require.Equal(t, after, unchanged)
	released, after := domain.Release(o, after, maxWait, *o.ReleaseAt)
	require.Len(t, released, 1)
	o = mustApply(t, o, released...)
	require.Equal(t, domain.StatusQueued, o.Status)
	require.EqualValues(t, 4, o.QueueSeq, "ahead of the order paid after it")
	require.Equal(t, 2, after.Queued)
	require.True(t, released[0].Data.(domain.OrderQueued).Released)
	again, _ := domain.Release(o, after, maxWait, o.ReleaseAt.Add(time.Minute))
	require.Empty(t, again, "a released order is not released twice")
}

func TestPaidAfterReleaseJoinsTheLineAtOnce(t *testing.T) {
	t.Parallel()
	o := scheduledOrder(t, "o1", t0.Add(10*time.Minute), 600)
	events, load, err := domain.Pay(o, "ref", domain.Load{Capacity: 1}, maxWait, o.ReleaseAt.Add(time.Second))
	require.NoError(t, err)
	o = mustApply(t, o, events...)
	require.Equal(t, domain.StatusAccepted, o.Status)
	require.Equal(t, 1, load.Active)
}

func TestCustomerMayCancelAScheduledOrder(t *testing.T) {
	t.Parallel()
	o := scheduledOrder(t, "o1", t0.Add(time.Hour), 600)
	events, load, err := domain.Pay(o, "ref", domain.Load{Capacity: 1}, maxWait, t0)
	require.NoError(t, err)
	o = mustApply(t, o, events...)
	cancelled, after, err := domain.Cancel(o, domain.ActorCustomer, "", load, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, load, after, "a scheduled order holds nothing of the live line")
	require.Equal(t, domain.StatusCancelled, mustApply(t, o, cancelled...).Status)
}

func TestSettingsWithSlotsAndHours(t *testing.T) {
	t.Parallel()
	s := validSettings()
	s.Slots = &domain.SlotSettings{Minutes: 15, Capacity: 20, LeadMinutes: 0, HorizonDays: 7}
	s.Hours = []domain.Period{{Day: 1, Opens: "08:00", Closes: "12:00", Capacity: intp(3)}}
	require.NoError(t, s.Validate())
	same := s
	same.Slots = &domain.SlotSettings{Minutes: 15, Capacity: 20, LeadMinutes: 0, HorizonDays: 7}
	same.Hours = []domain.Period{{Day: 1, Opens: "08:00", Closes: "12:00", Capacity: intp(3)}}
	require.True(t, s.Equal(same), "equal by value, not by pointer")
	same.Hours[0].Capacity = intp(4)
	require.False(t, s.Equal(same))
	s.Hours = []domain.Period{{Day: 1, Opens: "12:00", Closes: "08:00"}}
	require.ErrorContains(t, s.Validate(), "hours[0].closes")
	s.Hours, s.Slots = nil, &domain.SlotSettings{Minutes: 90, Capacity: 20, HorizonDays: 7}
	require.ErrorContains(t, s.Validate(), "slots.minutes")
}

func TestFitSlots(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		room  map[string]int
		slots []string
		loads []int
		want  []bool
		left  map[string]int
	}{
		{"first come first served", map[string]int{"a": 2}, []string{"a", "a", "a"}, []int{1, 1, 1},
			[]bool{true, true, false}, map[string]int{"a": 0}},
		{"a smaller later request takes what a larger one could not", map[string]int{"a": 3}, []string{"a", "a", "a"}, []int{2, 2, 1},
			[]bool{true, false, true}, map[string]int{"a": 0}},
		{"slots are apart", map[string]int{"a": 1, "b": 0}, []string{"b", "a", "a"}, []int{1, 1, 1},
			[]bool{false, true, false}, map[string]int{"a": 0, "b": 0}},
		{"a slot with no room left", map[string]int{}, []string{"a"}, []int{1}, []bool{false}, map[string]int{}},
		{"exactly the room", map[string]int{"a": 5}, []string{"a"}, []int{5}, []bool{true}, map[string]int{"a": 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, domain.FitSlots(c.room, c.slots, c.loads))
			require.Equal(t, c.left, c.room)
		})
	}
}

func TestRefuseKnownFull(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	settings := domain.MerchantSettings{Slots: &domain.SlotSettings{Minutes: 15, Capacity: 20, LeadMinutes: 30, HorizonDays: 7}}
	known := domain.KnownFullSlot{Settings: settings, Location: time.UTC, MerchantVersion: 4}
	slot := now.Add(time.Hour)
	for _, c := range []struct {
		name   string
		seen   domain.SlotSeen
		pickup time.Time
		refuse bool
	}{
		{"no room and nothing changed", domain.SlotSeen{Room: 0, MerchantVersion: 4}, slot, true},
		{"room came back", domain.SlotSeen{Room: 1, MerchantVersion: 4}, slot, false},
		{"the merchant's settings changed", domain.SlotSeen{Room: 0, MerchantVersion: 5}, slot, false},
		{"the key was used before: its batch answers the replay", domain.SlotSeen{Room: 0, MerchantVersion: 4, KeyRecorded: true}, slot, false},
		{"the slot is inside the lead time now: its batch says why", domain.SlotSeen{Room: 0, MerchantVersion: 4}, now.Add(15 * time.Minute), false},
		{"off the slot grid", domain.SlotSeen{Room: 0, MerchantVersion: 4}, slot.Add(time.Minute), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := domain.RefuseKnownFull(known, c.seen, c.pickup, now)
			if !c.refuse {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, domain.ErrSlotFull)
		})
	}
}

func TestHoldsSlot(t *testing.T) {
	t.Parallel()
	holds := map[domain.OrderStatus]bool{
		domain.StatusAwaitingPayment: true, domain.StatusScheduled: true, domain.StatusQueued: true,
		domain.StatusAccepted: true, domain.StatusCompleted: true, domain.StatusExpired: true,
		domain.StatusCancelled: false, domain.StatusClosed: false,
	}
	for status, want := range holds {
		require.Equal(t, want, status.HoldsSlot(), status)
	}
}

func TestSlotReturn(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 1, 12, 15, 0, 0, time.UTC)
	order := func(status domain.OrderStatus, version, load int, pickup *time.Time) domain.Order {
		return domain.Order{Status: status, Version: version, Load: load, PickupAt: pickup}
	}
	for _, tc := range []struct {
		name          string
		before, after domain.Order
		load          int // 0: nothing given back
	}{
		{"a scheduled order cancelled", order(domain.StatusScheduled, 2, 3, &at), order(domain.StatusCancelled, 3, 3, &at), 3},
		{"an unpaid order closed", order(domain.StatusAwaitingPayment, 1, 2, &at), order(domain.StatusClosed, 2, 2, &at), 2},
		{"a queued order cancelled, load unset", order(domain.StatusQueued, 3, 0, &at), order(domain.StatusCancelled, 4, 0, &at), 1},
		{"an accepted order cancelled", order(domain.StatusAccepted, 4, 1, &at), order(domain.StatusCancelled, 5, 1, &at), 1},
		{"completed: served in its slot", order(domain.StatusAccepted, 4, 1, &at), order(domain.StatusCompleted, 5, 1, &at), 0},
		{"expired: may be retried", order(domain.StatusQueued, 3, 1, &at), order(domain.StatusExpired, 4, 1, &at), 0},
		{"paid: still holds", order(domain.StatusAwaitingPayment, 1, 1, &at), order(domain.StatusScheduled, 2, 1, &at), 0},
		{"no slot", order(domain.StatusAccepted, 4, 1, nil), order(domain.StatusCancelled, 5, 1, nil), 0},
		{"a new order", domain.Order{}, order(domain.StatusScheduled, 2, 1, &at), 0},
		{"already cancelled", order(domain.StatusCancelled, 5, 1, &at), order(domain.StatusCancelled, 5, 1, &at), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotAt, load, ok := domain.SlotReturn(tc.before, tc.after)
			require.Equal(t, tc.load > 0, ok)
			require.Equal(t, tc.load, load)
			if ok {
				require.Equal(t, at, gotAt)
			}
		})
	}
}
