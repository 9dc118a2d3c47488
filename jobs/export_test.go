package jobs

import "context"

// LookAsOnCitus makes b work as on Citus on any database: it looks at
// River's timers queue when there is something to do there (looks), rather
// than firing the due timers every TimerPollInterval.
func (b *Backstop) LookAsOnCitus() *Backstop {
	b.direct = func(context.Context) bool { return false }
	return b
}
