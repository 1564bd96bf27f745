package harness

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/bench/internal/servers"
)

// shardsProcesses is how many processes campaign in every election of
// the shards scenario: a leader per shard with two standbys.
const shardsProcesses = 3

// shardsTTL is the lease TTL / session timeout of the shards scenario.
const shardsTTL = 10 * time.Second

// ShardsRow is one case of the shards scenario: E elections, each with a
// candidate of each of three processes, every process on one session.
type ShardsRow struct {
	Target        string  `json:"target"`
	Store         string  `json:"store"`
	Lib           string  `json:"library"`
	Elections     int     `json:"elections"`
	LeadersMS     float64 `json:"all_lead_ms"`       // every election has a leader; -1 when not reached
	RegisteredMS  float64 `json:"all_registered_ms"` // every candidate registered; -1 when not known
	ReqPerSecProc float64 `json:"steady_requests_per_s_per_process"`
	Goroutines    float64 `json:"goroutines_per_election"`
	HeapBytes     float64 `json:"heap_bytes_per_election"`
	Err           string  `json:"error,omitempty"`
	QuietMS       float64 `json:"quiet_ms"` // when the processes' traffic settled after registration
	Note          string  `json:"note,omitempty"`
}

func (r *run) shards(ctx context.Context) error {
	n := 10000
	if r.cfg.Short {
		n = 20
	}
	if r.cfg.Shards > 0 {
		n = r.cfg.Shards
	}
	for _, t := range []target{etcd1, zk1} {
		if t.store == libs.ZK {
			if err := servers.ZKAvailable(); err != nil {
				r.rep.note(fmt.Sprintf("shards on %s: %v", t.title, err))
				continue
			}
		}
		for _, e := range r.libsOf(t.store, libs.Ours, libs.Peer) {
			env, stop, err := r.privateServer(t)
			if err != nil {
				return err
			}
			env.Conns = conns.Options{Counted: true}
			env.Scenario = "shards"
			lib, err := e.New(ctx, env)
			if err != nil {
				stop()
				return err
			}
			fleet, ok := lib.(peer.Fleet)
			if !ok { // one session per candidate by design: not this scenario's subject
				lib.Close()
				stop()
				continue
			}
			s := &ShardsRow{Target: t.key, Store: t.title, Lib: e.Name, Elections: n, LeadersMS: -1, RegisteredMS: -1}
			r.rep.Shards = append(r.rep.Shards, s)
			r.logf("shards on %s (a fresh server): %s, %d elections × %d processes", t.title, e.Name, n, shardsProcesses)
			if err := r.shardsOne(ctx, lib, fleet, t, env.Endpoints, s); err != nil {
				s.Err = err.Error()
			}
			lib.Close()
			stop()
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// shardsOne: the first process campaigns in every election (it leads
// there), at most scaleWindow Campaign calls in flight; then the other
// two (they wait), at most scaleWindow started and not yet registered by
// the census of the election's keys (etcd; on ZooKeeper, whose children
// are counted per election, the standbys start at the same pace but their
// registration is not timed).
func (r *run) shardsOne(ctx context.Context, lib peer.Library, fleet peer.Fleet, t target, endpoints []string, s *ShardsRow) error {
	n := s.Elections
	h0, g0 := heapBaseline(shardsProcesses * n)
	procs := make([]peer.Process, shardsProcesses)
	for j := range procs {
		p, err := fleet.NewProcess(ctx, shardsTTL)
		if err != nil {
			return err
		}
		procs[j] = p
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var cands []peer.Candidate
	defer func() {
		cancel()
		r.logf("  closing the processes")
		closeAll(cands)
		wg.Wait()
		for _, p := range procs {
			p.Close()
		}
	}()
	prefix := fmt.Sprintf("/bench/shards/%s/%s", t.key, slug(lib.Name()))
	var census *conns.Tally
	if t.store == libs.Etcd {
		d := conns.NewEtcd(endpoints, conns.Options{})
		c, err := d.Plain(10 * time.Second)
		if err != nil {
			return err
		}
		defer d.Close()
		defer c.Close()
		if census, err = conns.NewTally(ctx, c.Etcd, prefix+"/"); err != nil {
			return err
		}
		defer census.Close()
	}
	count := func() int {
		if census == nil {
			return -1
		}
		k, err := census.Count()
		if err != nil {
			return -1
		}
		return k
	}
	deadline := time.Now().Add(2 * r.sz.scalePatience)
	start := time.Now()
	var leaders atomic.Int64
	sem := make(chan struct{}, scaleWindow)
	var failMu sync.Mutex
	fails, firstFail := 0, error(nil)
	defer func() {
		failMu.Lock()
		defer failMu.Unlock()
		if fails > 0 {
			if s.Note != "" {
				s.Note += "; "
			}
			s.Note += fmt.Sprintf("%d Campaign calls failed and were called again, the first: %v", fails, firstFail)
		}
	}()
	campaign := func(c peer.Candidate, leads bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				_, err := c.Campaign(cctx)
				if err == nil {
					break
				}
				if cctx.Err() == nil {
					failMu.Lock()
					if fails++; firstFail == nil {
						firstFail = err
					}
					failMu.Unlock()
				}
				time.Sleep(100 * time.Millisecond)
			}
			if leads {
				leaders.Add(1)
				<-sem
			}
		}()
	}
	for i := range n {
		c, err := procs[0].NewCandidate(ctx, fmt.Sprintf("%s/%d", prefix, i), "p0")
		if err != nil {
			return err
		}
		cands = append(cands, c)
		sem <- struct{}{}
		campaign(c, true)
	}
	for int(leaders.Load()) < n {
		if time.Now().After(deadline) {
			s.Note = fmt.Sprintf("only %d of %d elections led within %v", leaders.Load(), n, 2*r.sz.scalePatience)
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.LeadersMS = float64(time.Since(start).Microseconds()) / 1000
	base := count()
	r.logf("  %d elections led after %s ms", n, ms(s.LeadersMS))
	started := 0
	for j := 1; j < shardsProcesses; j++ {
		for i := range n {
			for census != nil && started-(count()-base) >= scaleWindow {
				if time.Now().After(deadline) {
					s.Note = fmt.Sprintf("only %d of %d standbys registered within %v", count()-base, 2*n, 2*r.sz.scalePatience)
					return nil
				}
				time.Sleep(5 * time.Millisecond)
			}
			if census == nil && started%scaleWindow == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			c, err := procs[j].NewCandidate(ctx, fmt.Sprintf("%s/%d", prefix, i), fmt.Sprintf("p%d", j))
			if err != nil {
				return err
			}
			cands = append(cands, c)
			campaign(c, false)
			started++
		}
	}
	for census != nil && count()-base < started {
		if time.Now().After(deadline) {
			s.Note = fmt.Sprintf("only %d of %d standbys registered", count()-base, started)
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	if census != nil {
		s.RegisteredMS = float64(time.Since(start).Microseconds()) / 1000
	}
	r.logf("  all registered after %s ms", ms(s.RegisteredMS))
	settle := time.Second
	if r.cfg.Short {
		settle = 100 * time.Millisecond
	}
	time.Sleep(settle)
	// Registration is counted at each key's creation; a candidate's
	// watch comes after, and a client creates the watches of one stream
	// one at a time. Wait until the processes' traffic falls below one
	// request, event or renewal per second per process (over a second),
	// at most two TTLs, before the steady state is measured.
	total := func() int64 {
		var c peer.Counts
		for _, p := range procs {
			c = c.Add(p.Counts())
		}
		return c.Requests + c.Events + c.Renewals
	}
	for quietBy := time.Now().Add(2 * shardsTTL); ; {
		before := total()
		time.Sleep(time.Second)
		if total()-before <= int64(len(procs)) || time.Now().After(quietBy) || r.cfg.Short {
			break
		}
	}
	s.QuietMS = float64(time.Since(start).Microseconds()) / 1000
	h1, g1 := heapNow()
	s.HeapBytes = (float64(h1) - float64(h0)) / float64(n)
	s.Goroutines = float64(g1-g0) / float64(n)
	window := shardsTTL
	if r.cfg.Short {
		window = 500 * time.Millisecond
	}
	var c0 peer.Counts
	for _, p := range procs {
		c0 = c0.Add(p.Counts())
	}
	t0 := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return ctx.Err()
	}
	var c1 peer.Counts
	for _, p := range procs {
		c1 = c1.Add(p.Counts())
	}
	d := c1.Sub(c0)
	s.ReqPerSecProc = float64(d.Requests+d.Events+d.Renewals) / time.Since(t0).Seconds() / float64(len(procs))
	return nil
}
