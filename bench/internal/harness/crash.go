package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/bench/internal/peer"
)

// crashStagger spaces the starts of the crash samples, which run at the
// same time (each is mostly waiting out a TTL), so that the cuts do not
// line up with one phase of the store's expiry sweep.
const crashStagger = 137 * time.Millisecond

func (r *run) crash(ctx context.Context) error {
	for _, t := range []target{etcd1, zk1} {
		env, err := r.env(t)
		if err != nil {
			r.rep.note(fmt.Sprintf("crash on %s: %v", t.title, err))
			continue
		}
		env.Conns = conns.Options{Proxied: true}
		env.Scenario = "crash"
		for _, ttl := range r.sz.crashTTLs {
			r.crashOn(ctx, t, env, ttl)
		}
	}
	return nil
}

func (r *run) crashOn(ctx context.Context, t target, env libs.Env, ttl time.Duration) {
	entries := r.libsOf(t.store, libs.Ours, libs.Peer)
	bound := ttl + 600*time.Millisecond
	if t.store == libs.ZK {
		bound = ttl + 500*time.Millisecond
	}
	cas := fmt.Sprintf("TTL %v", ttl)
	r.logf("crash failover on %s, %s: %s, %d samples each, at once", t.title, cas, names(entries), r.sz.crash)
	type libRun struct {
		d   *Dist
		lib peer.Library
		mu  sync.Mutex
	}
	var runs []*libRun
	for _, e := range entries {
		d := &Dist{Scenario: "crash", Target: t.key, Store: t.title, Case: cas, Lib: e.Name, Role: string(e.Role), Bound: float64(bound.Milliseconds())}
		r.rep.Dists = append(r.rep.Dists, d)
		lib, err := e.New(ctx, env)
		if err != nil {
			d.Err = err.Error()
			continue
		}
		runs = append(runs, &libRun{d: d, lib: lib})
	}
	var wg sync.WaitGroup
	for i := 0; i < r.sz.crash; i++ {
		for _, lr := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("/bench/crash/%s/%s/%d/%d", t.key, slug(lr.d.Lib), ttl.Milliseconds(), i)
				lat, err := crashSample(ctx, lr.lib, name, ttl)
				lr.mu.Lock()
				defer lr.mu.Unlock()
				if err != nil {
					lr.d.Err = err.Error()
					return
				}
				lr.d.MS = append(lr.d.MS, float64(lat.Microseconds())/1000)
			}()
			select {
			case <-time.After(crashStagger):
			case <-ctx.Done():
			}
		}
	}
	wg.Wait()
	for _, lr := range runs {
		_ = lr.lib.Close()
	}
}

// crashSample elects a leader, lets a second candidate wait, cuts the
// leader's connection and returns the time until the waiter leads.
func crashSample(ctx context.Context, lib peer.Library, name string, ttl time.Duration) (time.Duration, error) {
	l, err := lib.NewCandidate(ctx, name, "leader", ttl)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	w, err := lib.NewCandidate(ctx, name, "waiter", ttl)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := l.Campaign(cctx); err != nil {
		return 0, fmt.Errorf("leader's campaign: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*ttl+time.Minute)
	defer wcancel()
	done := make(chan won, 1)
	go func() {
		at, err := w.Campaign(wctx)
		done <- won{at, err}
	}()
	time.Sleep(300 * time.Millisecond) // the waiter settles in the queue
	t0, err := l.Crash()
	if err != nil {
		wcancel()
		<-done
		return 0, fmt.Errorf("crash: %w", err)
	}
	res := <-done
	if res.err != nil {
		return 0, fmt.Errorf("waiter's campaign: %w", res.err)
	}
	return time.Duration(res.at - t0), nil
}
