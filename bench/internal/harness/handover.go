package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
)

// handoverTTL is the lease TTL / session timeout of the handover
// candidates: long enough never to expire during a run.
const handoverTTL = 10 * time.Second

// sampler takes one handover sample at a time.
type sampler interface {
	sample(ctx context.Context, wait time.Duration) (time.Duration, error)
	close()
}

// slug makes a library name usable in a key or znode path.
func slug(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, s)
}

func (r *run) handover(ctx context.Context) error {
	var errs []error
	for _, t := range []target{etcd1, etcd3, zk1, zk3} {
		if err := r.handoverOn(ctx, t); err != nil {
			r.rep.note(fmt.Sprintf("handover on %s: %v", t.title, err))
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

type handoverLib struct {
	dist  *Dist
	lib   peer.Library
	s     sampler
	spent time.Duration
	stop  bool
}

func (r *run) handoverOn(ctx context.Context, t target) error {
	env, err := r.env(t)
	if err != nil {
		return err
	}
	env.Scenario = "handover"
	entries := r.libsOf(t.store, libs.Ours, libs.Peer)
	regimes := []struct {
		name string
		wait time.Duration
		n    int
	}{{churn, 20 * time.Millisecond, r.sz.churn}, {settled, 300 * time.Millisecond, r.sz.settled}}
	for _, rg := range regimes {
		// A library's sampling stops after the budget, or after the
		// regime's own waits plus 100 ms a sample when that is longer:
		// a slow library does not hold the run, and the settled regime's
		// waits alone do not cut its tail short.
		budget := max(r.sz.budget, time.Duration(rg.n)*(rg.wait+100*time.Millisecond))
		r.logf("handover on %s, %s: %s and the floor, %d samples", t.title, rg.name, names(entries), rg.n)
		var hs []*handoverLib
		for _, e := range entries {
			d := &Dist{Scenario: "handover", Target: t.key, Store: t.title, Case: rg.name, Lib: e.Name, Role: string(e.Role)}
			r.rep.Dists = append(r.rep.Dists, d)
			lib, err := e.New(ctx, env)
			if err != nil {
				d.Err = err.Error()
				continue
			}
			name := fmt.Sprintf("/bench/handover/%s/%s/%d", t.key, slug(e.Name), rg.wait.Milliseconds())
			s, err := newPair(ctx, lib, name)
			if err != nil {
				d.Err = err.Error()
				_ = lib.Close()
				continue
			}
			hs = append(hs, &handoverLib{dist: d, lib: lib, s: s})
		}
		fd := &Dist{Scenario: "handover", Target: t.key, Store: t.title, Case: rg.name, Lib: "floor: delete → watch event", Role: "floor"}
		r.rep.Dists = append(r.rep.Dists, fd)
		if fs, err := newFloor(t, env); err != nil {
			fd.Err = err.Error()
		} else {
			hs = append(hs, &handoverLib{dist: fd, s: fs})
		}
		for i := 0; i < rg.n && ctx.Err() == nil; i++ {
			for k := range hs {
				h := hs[(i+k)%len(hs)] // take turns, starting with a different one each round
				if h.stop {
					continue
				}
				wait := rg.wait
				if h.dist.Role == "floor" {
					wait = min(wait, 20*time.Millisecond)
				}
				t0 := time.Now()
				d, err := h.s.sample(ctx, wait)
				h.spent += time.Since(t0)
				if err != nil {
					h.dist.Err = err.Error()
					h.stop = true
					continue
				}
				h.dist.MS = append(h.dist.MS, float64(d.Microseconds())/1000)
				if h.spent > budget && i+1 < rg.n {
					h.stop = true
					h.dist.Note = fmt.Sprintf("stopped after %d samples: time budget %v", i+1, budget)
				}
			}
		}
		for _, h := range hs {
			h.s.close()
			if h.lib != nil {
				_ = h.lib.Close()
			}
		}
	}
	return nil
}

// pair is two candidates of one library handing leadership back and forth.
type pair struct {
	cs     [2]peer.Candidate
	leader int
}

func newPair(ctx context.Context, lib peer.Library, name string) (*pair, error) {
	p := &pair{}
	for i := range p.cs {
		c, err := lib.NewCandidate(ctx, name, fmt.Sprintf("c%d", i), handoverTTL)
		if err != nil {
			p.close()
			return nil, err
		}
		p.cs[i] = c
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := p.cs[0].Campaign(cctx); err != nil {
		p.close()
		return nil, fmt.Errorf("first campaign: %w", err)
	}
	return p, nil
}

type won struct {
	at  int64
	err error
}

func (p *pair) sample(ctx context.Context, wait time.Duration) (time.Duration, error) {
	w := 1 - p.leader
	cctx, cancel := context.WithTimeout(ctx, wait+time.Minute)
	defer cancel()
	done := make(chan won, 1)
	go func() {
		at, err := p.cs[w].Campaign(cctx)
		done <- won{at, err}
	}()
	time.Sleep(wait) // the regime: how long the waiter has waited
	t0, err := p.cs[p.leader].Release(ctx)
	if err != nil {
		cancel()
		<-done
		return 0, fmt.Errorf("release: %w", err)
	}
	res := <-done
	if res.err != nil {
		return 0, fmt.Errorf("campaign: %w", res.err)
	}
	p.leader = w
	return time.Duration(res.at - t0), nil
}

func (p *pair) close() {
	for _, c := range p.cs {
		if c != nil {
			_ = c.Close()
		}
	}
}

// newFloor returns the store's floor: a key's delete → the watch event on
// another client (etcd), a node's delete → the watch event on another
// connection (ZooKeeper).
func newFloor(t target, env libs.Env) (sampler, error) {
	var d *conns.Dialer
	if t.store == libs.Etcd {
		d = conns.NewEtcd(env.Endpoints, conns.Options{})
	} else {
		d = conns.NewZK(env.Servers, conns.Options{})
	}
	a, err := d.Get(handoverTTL)
	if err != nil {
		return nil, err
	}
	b, err := d.Get(handoverTTL)
	if err != nil {
		a.Close()
		return nil, err
	}
	f := &floor{a: a, b: b, key: "/bench/floor/" + t.key}
	if t.store == libs.ZK {
		f.key = "/bench-floor-" + t.key
	}
	return f, nil
}

type floor struct {
	a, b *conns.Conn
	key  string
}

func (f *floor) sample(ctx context.Context, wait time.Duration) (time.Duration, error) {
	if f.a.ZK != nil {
		if _, err := f.a.ZK.Create(f.key, nil, gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll)); err != nil {
			return 0, err
		}
		// b may be connected to another server of an ensemble, which may
		// not have applied the create yet: Sync catches that server up
		// first, so the watch is set on the node, not on its absence.
		if _, err := f.b.ZK.Sync(f.key); err != nil {
			return 0, fmt.Errorf("floor: sync: %w", err)
		}
		ok, _, ev, err := f.b.ZK.ExistsW(f.key)
		if err != nil || !ok {
			return 0, fmt.Errorf("floor: exists %v: %v", ok, err)
		}
		time.Sleep(wait)
		t0 := mono.Now()
		if err := f.a.ZK.Delete(f.key, -1); err != nil {
			return 0, err
		}
		select {
		case <-ev:
		case <-time.After(time.Minute):
			return 0, errors.New("floor: no watch event")
		}
		return time.Duration(mono.Now() - t0), nil
	}
	put, err := f.a.Etcd.Put(ctx, f.key, "x")
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := f.b.Etcd.Watch(wctx, f.key, clientv3.WithRev(put.Header.Revision+1), clientv3.WithFilterPut())
	time.Sleep(wait)
	t0 := mono.Now()
	if _, err := f.a.Etcd.Delete(ctx, f.key); err != nil {
		return 0, err
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case wr, ok := <-wch:
			if !ok {
				return 0, errors.New("floor: watch closed")
			}
			if len(wr.Events) > 0 {
				return time.Duration(mono.Now() - t0), nil
			}
		case <-timeout:
			return 0, errors.New("floor: no watch event")
		}
	}
}

func (f *floor) close() {
	f.a.Close()
	f.b.Close()
}
