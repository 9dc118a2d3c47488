package domain

import "time"

// PauseMode says what a paused merchant does with new orders: in both modes
// nobody is admitted until it resumes; "queue" still takes placements (they
// wait in line), "refuse" answers them merchant_paused.
type PauseMode string

const (
	PauseQueue  PauseMode = "queue"
	PauseRefuse PauseMode = "refuse"
)

// MaxPauseSeconds bounds for_seconds.
const MaxPauseSeconds = 86400

// Merchant pause event types.
const (
	EventMerchantPaused  = "merchant.paused"
	EventMerchantResumed = "merchant.resumed"
)

// Pause is a merchant's pause; the zero Pause is "not paused".
type Pause struct {
	Mode  PauseMode  `json:"mode"`
	Until *time.Time `json:"until,omitempty"`
}

// Paused reports whether p is a pause at all.
func (p Pause) Paused() bool { return p.Mode != "" }

// Refuses reports whether new placements are refused.
func (p Pause) Refuses() bool { return p.Mode == PauseRefuse }

// RetryAfter is how long until the pause ends by itself, or 0 when its end
// is unknown.
func (p Pause) RetryAfter(now time.Time) time.Duration {
	if p.Until == nil || !p.Until.After(now) {
		return 0
	}
	return p.Until.Sub(now)
}

// PauseRequest is a request to pause: a mode and at most one of an end
// time or a duration.
type PauseRequest struct {
	Mode       PauseMode
	Until      *time.Time
	ForSeconds *int
	Reason     string
}

type MerchantPaused struct {
	Mode     PauseMode  `json:"mode"`
	Until    *time.Time `json:"until,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	By       Actor      `json:"by"`
	PausedAt time.Time  `json:"paused_at"`
}

// MerchantResumed records the end of a pause; Scheduled says the pause
// reached its own end rather than someone resuming it.
type MerchantResumed struct {
	By        Actor     `json:"by"`
	Scheduled bool      `json:"scheduled,omitempty"`
	ResumedAt time.Time `json:"resumed_at"`
}

// PauseMerchant decides a pause request at now. Pausing a paused merchant
// replaces its pause (a new mode or end).
func PauseMerchant(m Merchant, req PauseRequest, by Actor, now time.Time) ([]Event, error) {
	if req.Mode != PauseQueue && req.Mode != PauseRefuse {
		return nil, Errorf(CodeValidation, `mode must be "queue" or "refuse"`)
	}
	if len(req.Reason) > MaxReasonLength {
		return nil, Errorf(CodeValidation, "reason must be at most %d characters", MaxReasonLength)
	}
	var until *time.Time
	switch {
	case req.Until != nil && req.ForSeconds != nil:
		return nil, Errorf(CodeValidation, "give until or for_seconds, not both")
	case req.Until != nil:
		if !req.Until.After(now) {
			return nil, Errorf(CodeValidation, "until must be in the future")
		}
		if req.Until.Sub(now) > MaxPauseSeconds*time.Second {
			return nil, Errorf(CodeValidation, "until must be at most %d seconds ahead", MaxPauseSeconds)
		}
		// Stored to the microsecond: the pause's timer names its end, and
		// an end finer than the stored one never matched it (ResumeDue).
		u := req.Until.UTC().Truncate(time.Microsecond)
		until = &u
	case req.ForSeconds != nil:
		if *req.ForSeconds < 1 || *req.ForSeconds > MaxPauseSeconds {
			return nil, Errorf(CodeValidation, "for_seconds must be between 1 and %d", MaxPauseSeconds)
		}
		u := now.Add(time.Duration(*req.ForSeconds) * time.Second).UTC()
		until = &u
	}
	return []Event{{Type: EventMerchantPaused, Data: MerchantPaused{
		Mode: req.Mode, Until: until, Reason: req.Reason, By: by, PausedAt: now,
	}}}, nil
}

// ResumeMerchant ends a merchant's pause; resuming an unpaused merchant is
// a no-op (no events).
func ResumeMerchant(m Merchant, by Actor, now time.Time) []Event {
	if !m.Pause.Paused() {
		return nil
	}
	return []Event{{Type: EventMerchantResumed, Data: MerchantResumed{By: by, ResumedAt: now}}}
}

// ResumeDue ends a pause whose end, until, has come: the timer of the
// pause that ends at until. A timer of an earlier pause (replaced or
// resumed since) or one that fires early does nothing.
func ResumeDue(m Merchant, until time.Time, now time.Time) []Event {
	p := m.Pause
	if !p.Paused() || p.Until == nil || !p.Until.Equal(until) || now.Before(until) {
		return nil
	}
	return []Event{{Type: EventMerchantResumed, Data: MerchantResumed{By: ActorSystem, Scheduled: true, ResumedAt: now}}}
}
