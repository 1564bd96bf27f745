package harness

import (
	"context"
	"time"

	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/mono"
)

// clockFault runs a candidate's clock at the wrong rate — the leader's, or
// at random under Config.Rate — and, while it does, cuts the candidate off
// the store for longer than its TTL: a leader then keeps its Term until
// its deadline counted on its own clock, while the store expires its lease
// by the store's. clock-fast runs the clock at (1+δ) × real time (the Term
// ends early: harmless), clock-slow at 1/(1+δ): the store's clock runs
// 1+δ times as fast as the candidate's, which the drift bound ρ covers
// while δ < ρ (a Term counts TTL/(1+ρ) − Margin of local time, at most
// (TTL/(1+ρ) − Margin)(1+δ) < TTL of real time). The rate is restored
// after the cut heals. Only the clock the library reads is skewed, not Go's
// timers: the lease clock's deadline timer, set for the skewed time left,
// fires late on a fast clock and early on a slow one, and the Term's end
// is the clock's reading either way (Term.Err reads it, and the timer sets
// itself again when early).
func (r *run) clockFault(ctx context.Context, kind string) error {
	p, err := r.target(ctx, r.leaderShare(ctx))
	if err != nil {
		return err
	}
	defer r.release(p)
	rng := r.rngOf(ctx)
	delta := r.cfg.Drift * (0.5 + 0.5*rng.Float64()) // [ρ/2, ρ)
	if r.cfg.Skew > 0 {
		delta = r.cfg.Skew
	}
	rate := 1 + delta
	if kind == ClockSlow {
		rate = 1 / (1 + delta)
	}
	before := r.betweenIn(ctx, r.cfg.TTL/2, r.cfg.TTL)
	cut := r.cfg.TTL + r.cfg.TTL/2 + r.betweenIn(ctx, 500*time.Millisecond, r.cfg.TTL)
	after := r.betweenIn(ctx, 0, r.cfg.TTL/2)
	start := mono.Now()
	if err := p.setRate(rate); err != nil {
		return err
	}
	_ = sleep(ctx, before)
	p.cut()
	_ = sleep(ctx, cut)
	p.heal()
	_ = sleep(ctx, after)
	err = p.setRate(1)
	r.fault(nemesis.Fault{Kind: kind, Target: p.id, PID: p.pid(), Start: start, End: mono.Now()})
	r.logf("%s: %s's clock at %.4f × real time (δ %.4f, ρ %.4f) for %v, cut off the store for %v of it",
		kind, p.id, rate, delta, r.cfg.Drift, time.Duration(mono.Now()-start).Round(time.Millisecond), cut.Round(time.Millisecond))
	return err
}
