package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/bench/internal/peer"
)

// herdTTL is the lease TTL / session timeout in the herd and scale
// scenarios.
const herdTTL = 10 * time.Second

func (r *run) herd(ctx context.Context) error {
	for _, t := range []target{etcd1, zk1} {
		env, err := r.env(t)
		if err != nil {
			r.rep.note(fmt.Sprintf("herd on %s: %v", t.title, err))
			continue
		}
		env.Conns = conns.Options{Counted: true}
		env.Scenario = "herd"
		for _, e := range r.libsOf(t.store, libs.Ours, libs.Naive, libs.Peer) {
			h := &HerdRow{Target: t.key, Store: t.title, Lib: e.Name, Role: string(e.Role), N: r.sz.herdN, Handovers: r.sz.herdHandovers}
			r.rep.Herd = append(r.rep.Herd, h)
			r.logf("herd on %s: %s, %d candidates", t.title, e.Name, h.N)
			if err := r.herdOne(ctx, e, env, h); err != nil {
				h.Err = err.Error()
			}
		}
	}
	return nil
}

// candidates makes n candidates of lib for the election name, a few at a
// time.
func makeCandidates(ctx context.Context, lib peer.Library, name string, n int, ttl time.Duration) ([]peer.Candidate, error) {
	cs := make([]peer.Candidate, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cs[i], errs[i] = lib.NewCandidate(ctx, name, fmt.Sprintf("c%05d", i), ttl)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(cs)
		return nil, err
	}
	return cs, nil
}

func closeAll(cs []peer.Candidate) {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, c := range cs {
		if c == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = c.Close()
		}()
	}
	wg.Wait()
}

// campaigns is every candidate's Campaign call, running.
type campaigns struct {
	won chan int // the index of each candidate that wins
	at  []int64  // the Mono instant candidate i's Campaign returned, set before i is sent on won
	wg  sync.WaitGroup

	mu    sync.Mutex
	fails int
	first error
}

// failed returns how many Campaign calls failed (other than by the
// context's end) and the first error.
func (c *campaigns) failed() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fails, c.first
}

// campaignAll starts every candidate's Campaign.
func campaignAll(ctx context.Context, cs []peer.Candidate) *campaigns {
	c := newCampaigns(len(cs))
	for i, cand := range cs {
		c.start(ctx, i, cand)
	}
	return c
}

func newCampaigns(n int) *campaigns { return &campaigns{won: make(chan int, n), at: make([]int64, n)} }

// start starts candidate i's Campaign. A Campaign that fails (other than
// by ctx's end) is counted and called again after 100 ms, as an
// application's retry loop would.
func (c *campaigns) start(ctx context.Context, i int, cand peer.Candidate) {
	{
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for {
				at, err := cand.Campaign(ctx)
				if err == nil {
					c.at[i] = at
					c.won <- i
					return
				}
				if ctx.Err() != nil {
					return
				}
				c.mu.Lock()
				c.fails++
				if c.first == nil {
					c.first = err
				}
				c.mu.Unlock()
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
					return
				}
			}
		}()
	}
}

func counts(cs []peer.Candidate) ([]peer.Counts, bool) {
	out := make([]peer.Counts, len(cs))
	for i, c := range cs {
		cc, ok := c.(peer.Counter)
		if !ok {
			return nil, false
		}
		out[i] = cc.Counts()
	}
	return out, true
}

// quiet waits until the candidates' requests and events have not changed
// for 500 ms (renewals do not count), or max passes.
func quiet(cs []peer.Candidate, max time.Duration) {
	sum := func() int64 {
		var s int64
		c, _ := counts(cs)
		for _, x := range c {
			s += x.Requests + x.Events
		}
		return s
	}
	last, still := sum(), 0
	deadline := time.Now().Add(max)
	for still < 5 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if s := sum(); s == last {
			still++
		} else {
			last, still = s, 0
		}
	}
}

func (r *run) herdOne(ctx context.Context, e libs.Entry, env libs.Env, h *HerdRow) error {
	lib, err := e.New(ctx, env)
	if err != nil {
		return err
	}
	defer lib.Close()
	name := fmt.Sprintf("/bench/herd/%s/%s", h.Target, slug(e.Name))
	probe, err := lib.NewCandidate(ctx, name, "probe", herdTTL)
	if err != nil {
		return err
	}
	_, counted := probe.(peer.Counter)
	_ = probe.Close()
	if !counted {
		return nil // h.Counted stays false: the row says "not counted"
	}
	cs, err := makeCandidates(ctx, lib, name, h.N, herdTTL)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	camp := campaignAll(cctx, cs)
	defer func() {
		cancel()
		closeAll(cs)
		camp.wg.Wait()
	}()
	next := func() (int, error) {
		select {
		case i := <-camp.won:
			return i, nil
		case <-time.After(time.Minute):
			return 0, errors.New("no leader within a minute")
		}
	}
	leader, err := next()
	if err != nil {
		return err
	}
	if _, ok := counts(cs); !ok {
		return nil // h.Counted stays false
	}
	h.Counted = true
	if census, ok := lib.(peer.Census); ok {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if n, err := census.Registered(ctx, name); err == nil && n >= h.N {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	quiet(cs, 30*time.Second)
	for range h.Handovers {
		before, _ := counts(cs)
		if _, err := cs[leader].Release(ctx); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		nl, err := next()
		if err != nil {
			return err
		}
		quiet(cs, 30*time.Second)
		after, _ := counts(cs)
		woken := 0
		var ev, req int64
		for i := range cs {
			if i == leader {
				continue
			}
			d := after[i].Sub(before[i])
			if d.Requests+d.Events > 0 {
				woken++
			}
			ev += d.Events
			req += d.Requests
		}
		h.Woken = append(h.Woken, woken)
		h.Events = append(h.Events, ev)
		h.Requests = append(h.Requests, req)
		leader = nl
	}
	if n, err := camp.failed(); n > 0 {
		h.Note = fmt.Sprintf("%d Campaign calls failed and were called again; the first: %v", n, err)
	}
	return nil
}
