package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/internal/mono"
)

// electorMaker is a library that makes Electors of this module with
// options (package ours).
type electorMaker interface {
	NewElector(ctx context.Context, name, id string, ttl time.Duration, opts ...election.Option) (election.Elector, func(), error)
}

// preemptHold is the hold-off of the preemption samples.
const preemptHold = 50 * time.Millisecond

func (r *run) transfer(ctx context.Context) error {
	var errs []error
	for _, t := range []target{etcd1, etcd3, zk1, zk3} {
		if err := r.transferOn(ctx, t); err != nil {
			r.rep.note(fmt.Sprintf("transfer on %s: %v", t.title, err))
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// xferRig is three candidates of one election taking turns: one leads,
// two wait; each sample's old leader campaigns again at the back.
type xferRig struct {
	r      *run
	mk     electorMaker
	name   string
	es     map[string]election.Elector
	closes []func()
	won    chan xferWon
	leader election.Elector
	term   *election.Term
}

type xferWon struct {
	e   election.Elector
	t   *election.Term
	at  int64
	err error
}

func (x *xferRig) campaign(ctx context.Context, e election.Elector) {
	go func() {
		t, err := e.Campaign(ctx)
		x.won <- xferWon{e, t, mono.Now(), err}
	}()
}

// next waits for the next Campaign to return.
func (x *xferRig) next(ctx context.Context) (xferWon, error) {
	select {
	case w := <-x.won:
		if w.err != nil {
			return w, fmt.Errorf("campaign: %w", w.err)
		}
		x.leader, x.term = w.e, w.t
		return w, nil
	case <-time.After(time.Minute):
		return xferWon{}, errors.New("no candidate led within a minute")
	case <-ctx.Done():
		return xferWon{}, ctx.Err()
	}
}

// queued waits until n candidates wait.
func (x *xferRig) queued(ctx context.Context, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		cs, err := election.Candidates(ctx, x.leader)
		if err == nil && len(cs) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting candidates %v (error %v), want %d", cs, err, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (x *xferRig) close() {
	for _, c := range x.closes {
		c()
	}
}

func (r *run) transferOn(ctx context.Context, t target) error {
	env, err := r.env(t)
	if err != nil {
		return err
	}
	env.Scenario = "transfer"
	entries := r.libsOf(t.store, libs.Ours)
	if len(entries) == 0 {
		return nil
	}
	e := entries[0]
	n := max(2, r.sz.churn/2)
	np := max(2, r.sz.churn/10)
	r.logf("transfer on %s: %s, %d handovers, %d transfers, %d preemptions and the floor", t.title, e.Name, n, n, np)
	dist := func(cas string) *Dist {
		d := &Dist{Scenario: "transfer", Target: t.key, Store: t.title, Case: cas, Lib: e.Name, Role: string(e.Role)}
		r.rep.Dists = append(r.rep.Dists, d)
		return d
	}
	hand, xfer := dist("handover (Resign)"), dist("transfer (to the last waiter)")
	pre := dist(fmt.Sprintf("preemption (registration + hold-off %v)", preemptHold))
	fd := &Dist{Scenario: "transfer", Target: t.key, Store: t.title, Case: "floor", Lib: "floor: delete → watch event", Role: "floor"}
	r.rep.Dists = append(r.rep.Dists, fd)
	fail := func(err error) error {
		for _, d := range []*Dist{hand, xfer, pre} {
			if d.Err == "" {
				d.Err = err.Error()
			}
		}
		return err
	}
	lib, err := e.New(ctx, env)
	if err != nil {
		return fail(err)
	}
	defer lib.Close()
	mk, ok := lib.(electorMaker)
	if !ok {
		return fail(fmt.Errorf("%s cannot make Electors with options", e.Name))
	}
	x := &xferRig{r: r, mk: mk, name: fmt.Sprintf("/bench/transfer/%s", t.key), es: map[string]election.Elector{}, won: make(chan xferWon, 8)}
	defer x.close()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, id := range []string{"c0", "c1", "c2"} {
		el, done, err := mk.NewElector(ctx, x.name, id, handoverTTL, election.WithPreemption(preemptHold))
		if err != nil {
			return fail(err)
		}
		x.es[id], x.closes = el, append(x.closes, done)
	}
	x.campaign(cctx, x.es["c0"])
	if _, err := x.next(ctx); err != nil {
		return fail(err)
	}
	for _, id := range []string{"c1", "c2"} {
		x.campaign(cctx, x.es[id])
		if err := x.queued(ctx, map[string]int{"c1": 1, "c2": 2}[id]); err != nil {
			return fail(err)
		}
	}
	floor, ferr := newFloor(t, env)
	if ferr != nil {
		fd.Err = ferr.Error()
	} else {
		defer floor.close()
	}
	// sample runs one hand-over by act from the current leader and
	// records the time from act to the next Campaign's return.
	sample := func(d *Dist, act func(old election.Elector, t *election.Term, to string) error) error {
		time.Sleep(20 * time.Millisecond) // the churn regime of the handover scenario
		old, ot := x.leader, x.term
		cs, err := election.Candidates(ctx, old) // the target of a transfer, read before the clock starts
		if err != nil || len(cs) != 2 {
			return fmt.Errorf("candidates %v: %v", cs, err)
		}
		t0 := mono.Now()
		if err := act(old, ot, cs[1].ID); err != nil {
			return err
		}
		w, err := x.next(ctx)
		if err != nil {
			return err
		}
		d.MS = append(d.MS, float64(time.Duration(w.at-t0).Microseconds())/1000)
		x.campaign(cctx, old)
		return x.queued(ctx, 2)
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if err := sample(hand, func(old election.Elector, _ *election.Term, _ string) error { return old.Resign(ctx) }); err != nil {
			return fail(fmt.Errorf("handover: %w", err))
		}
		if err := sample(xfer, func(old election.Elector, t *election.Term, to string) error {
			return election.Transfer(ctx, old, t, to, election.KeepLeading)
		}); err != nil {
			return fail(fmt.Errorf("transfer: %w", err))
		}
		if floor != nil && fd.Err == "" {
			d, err := floor.sample(ctx, 20*time.Millisecond)
			if err != nil {
				fd.Err = err.Error()
			} else {
				fd.MS = append(fd.MS, float64(d.Microseconds())/1000)
			}
		}
	}
	for i := 0; i < np && ctx.Err() == nil; i++ {
		// A candidate of higher priority campaigns: from its Campaign
		// call to its return (its registration, the hold-off, the
		// hand-over). Then it resigns, and the head of the queue leads.
		p, done, err := mk.NewElector(ctx, x.name, fmt.Sprintf("p%d", i), handoverTTL, election.WithPriority(1))
		if err != nil {
			return fail(err)
		}
		old := x.leader
		t0 := mono.Now()
		x.campaign(cctx, p)
		w, err := x.next(ctx)
		if err == nil && w.e != p {
			err = fmt.Errorf("%v led, not the preempting candidate", w.t)
		}
		if err != nil {
			done()
			return fail(fmt.Errorf("preemption: %w", err))
		}
		pre.MS = append(pre.MS, float64(time.Duration(w.at-t0).Microseconds())/1000)
		x.campaign(cctx, old)
		err = x.queued(ctx, 3)
		if err == nil {
			err = p.Resign(ctx)
		}
		if err == nil {
			_, err = x.next(ctx)
		}
		done()
		if err == nil {
			err = x.queued(ctx, 2)
		}
		if err != nil {
			return fail(fmt.Errorf("after a preemption: %w", err))
		}
	}
	return nil
}
