package harness

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/mono"
)

// preempt: a candidate of a priority above every other's joins; the
// leader steps down for it after the hold-off. A random waiting candidate
// stops gracefully, so that the number of candidates stays the same.
func (r *run) preempt(ctx context.Context) error {
	leader := ""
	if ev, ok := r.reg.Leader(); ok {
		leader = ev.Candidate
	}
	ws := r.live(leader)
	var stop *proc
	if len(ws) > 0 {
		stop = ws[r.pickOf(ctx).Intn(len(ws))]
		if !r.take(stop) {
			stop = nil
		}
	}
	r.smu.Lock()
	r.prio++
	prio := r.prio
	r.smu.Unlock()
	start := mono.Now()
	q, err := r.spawnWith(prio)
	if err != nil {
		if stop != nil {
			r.release(stop)
		}
		return err
	}
	if stop != nil {
		// It resigns and exits; it is not replaced.
		_ = stop.signal(syscall.SIGTERM)
		select {
		case <-stop.exited:
		case <-time.After(2 * r.cfg.TTL):
			_ = stop.signal(syscall.SIGKILL)
			<-stop.exited
		}
		stop.closeProxies()
		r.drop(stop)
	}
	next, err := r.awaitLeader(ctx, leader, PreemptHold(r.cfg.TTL)+FailoverBound(r.cfg.TTL))
	r.fault(nemesis.Fault{Kind: Preempt, Target: q.id, Start: start, End: mono.Now()})
	stopped := "none"
	if stop != nil {
		stopped = stop.id
	}
	r.logf("preempt: %s joins with priority %d (leader %q, stopped %s); next leader %q (%v)", q.id, prio, leader, stopped, next.Candidate, err)
	return ctx.Err()
}

// transfer: ask the leader, through the store, to hand its leadership to a
// random waiting candidate.
func (r *run) transfer(ctx context.Context) error {
	ev, err := r.awaitLeader(ctx, "", FailoverBound(r.cfg.TTL))
	if err != nil {
		return fmt.Errorf("no live leader: %w", err)
	}
	ws := r.live(ev.Candidate)
	if len(ws) == 0 {
		return errors.New("no waiting candidate")
	}
	to := ws[r.pickOf(ctx).Intn(len(ws))].id
	start := mono.Now()
	tctx, cancel := context.WithTimeout(ctx, 4*r.cfg.TTL)
	l, err := r.st.transfer(tctx, to)
	cancel()
	r.fault(nemesis.Fault{Kind: Transfer, Target: to, Start: start, End: mono.Now()})
	r.logf("transfer: %s → %s: %v, %v (%v)", ev.Candidate, to, l, err, time.Duration(mono.Now()-start).Round(time.Millisecond))
	return ctx.Err()
}
