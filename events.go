package election

import "time"

// Events receives what happens to an Elector's Terms and, under Run, to
// its campaigns: what a metrics package needs, with no code of its own in
// any backend. Give it to the Elector with WithEvents; Run reports its own
// events (Campaigned, LeaderChanged) to the same Events, which it finds in
// the Elector's options (the Elector's Options method, which every backend
// of this module has). Every field may be nil.
//
// The calls for one Term come in order — Elected, then each renewal, then
// Ended — on the goroutine that runs its renewal hooks, so they must return
// quickly; the calls of different Terms, and Run's, may come concurrently.
// A Term that had already ended when it was created (its deadline passed:
// the backend does not hand it out) is not reported.
type Events struct {
	// Elected: a Term began; l carries its token, deadline its first
	// deadline.
	Elected func(l Leader, deadline time.Time)
	// Renewed: a renewal attempt of a Term, as the after-renewal hook gets
	// it, and the slack: how much of the Term's validity was left when the
	// attempt was sent (the deadline before it, minus its send time;
	// negative when it left too late). A slack falling toward zero warns
	// that the lease is about to be lost.
	Renewed func(r Renewal, slack time.Duration)
	// Ended: a Term ended, with why (its Err).
	Ended func(l Leader, cause error)
	// Campaigned (Run): a Campaign call returned after waiting wait, with
	// its error (nil: it led).
	Campaigned func(wait time.Duration, err error)
	// LeaderChanged (Run): Observe reported a change of leader (a zero
	// Leader: none), the same values OnLeader gets.
	LeaderChanged func(l Leader)
}

// WithEvents gives the Elector the Events that receive its Terms' events
// and, under Run, its campaigns'.
func WithEvents(e *Events) Option { return func(opt *Options) { opt.Events = e } }
