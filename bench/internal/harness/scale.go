package harness

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/bench/internal/peer"
)

// perClient is how many candidates share one client in the scale scenario.
const perClient = 500

func (r *run) scale(ctx context.Context) error {
	for _, t := range []target{etcd1, zk1} {
		env, err := r.env(t)
		if err != nil {
			r.rep.note(fmt.Sprintf("scale on %s: %v", t.title, err))
			continue
		}
		for _, n := range r.sz.scaleNs {
			for _, e := range r.libsOf(t.store, libs.Ours, libs.Peer) {
				pool := (n + perClient - 1) / perClient
				env.Conns = conns.Options{Counted: true, Pool: pool}
				s := &ScaleRow{Target: t.key, Store: t.title, Lib: e.Name, Role: string(e.Role), N: n, Clients: pool, RegisteredMS: -1, LeadMS: -1}
				r.rep.Scale = append(r.rep.Scale, s)
				r.logf("scale on %s: %s, %d candidates over %d clients", t.title, e.Name, n, pool)
				if err := r.scaleOne(ctx, e, env, s); err != nil {
					s.Err = err.Error()
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}

func heapNow() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}

func (r *run) scaleOne(ctx context.Context, e libs.Entry, env libs.Env, s *ScaleRow) error {
	lib, err := e.New(ctx, env)
	if err != nil {
		return err
	}
	defer lib.Close()
	if l, ok := lib.(peer.Limited); ok && s.N > l.MaxCandidates() {
		s.Note = fmt.Sprintf("skipped: the adapter runs at most %d candidates", l.MaxCandidates())
		return nil
	}
	name := fmt.Sprintf("/bench/scale/%s/%s/%d", s.Target, slug(e.Name), s.N)
	census, hasCensus := lib.(peer.Census)
	if hasCensus { // its connection is made now, outside the measurement
		if _, err := census.Registered(ctx, name); err != nil {
			return fmt.Errorf("census: %w", err)
		}
	}
	h0, g0 := heapNow()
	start := time.Now()
	cs, err := makeCandidates(ctx, lib, name, s.N, herdTTL)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	won, wg := campaignAll(cctx, cs)
	defer func() {
		cancel()
		closeAll(cs)
		wg.Wait()
	}()
	patience := 2*time.Minute + time.Duration(s.N)*10*time.Millisecond
	deadline := time.Now().Add(patience)
	led, registered := false, !hasCensus
	for !(led && registered) {
		if time.Now().After(deadline) {
			return fmt.Errorf("not all registered within %v (led: %v)", patience, led)
		}
		if !led {
			select {
			case <-won:
				led = true
				s.LeadMS = float64(time.Since(start).Microseconds()) / 1000
			default:
			}
		}
		if !registered {
			if n, err := census.Registered(ctx, name); err == nil && n >= s.N {
				registered = true
				s.RegisteredMS = float64(time.Since(start).Microseconds()) / 1000
			}
		}
		if !(led && registered) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(time.Second) // let the registration's stragglers settle
	h1, g1 := heapNow()
	s.HeapBytes = (float64(h1) - float64(h0)) / float64(s.N)
	s.Goroutines = float64(g1-g0) / float64(s.N)
	if c, ok := lib.(peer.Counter); ok {
		s.Counted = true
		c0, t0 := c.Counts(), time.Now()
		select {
		case <-time.After(r.sz.steadyWindow):
		case <-ctx.Done():
			return ctx.Err()
		}
		d, el := c.Counts().Sub(c0), time.Since(t0).Seconds()
		s.ReqPerSecCand = float64(d.Requests+d.Events+d.Renewals) / el / float64(s.N)
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return nil
}
