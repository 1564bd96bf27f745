package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/mono"
)

// The in-process cluster's tick and message latency.
const (
	inmemTick    = 10 * time.Millisecond
	inmemLatency = time.Millisecond
)

// runInmem runs the in-process variant: backend/inmem's Zab (its leader
// carries an epoch token and needs a majority), candidates as goroutines
// of this process writing to the register directly.
func (r *run) runInmem(ctx context.Context, hist *nemesis.History) error {
	// The cluster's lease TTL is (TimeoutTicks − 2) ticks − 2 × latency:
	// the smallest one of at least cfg.TTL.
	ticks := int((r.cfg.TTL+2*inmemLatency+inmemTick-1)/inmemTick) + 2
	c, err := inmem.NewCluster(inmem.Zab, inmem.WithTick(inmemTick), inmem.WithTimeoutTicks(ticks),
		inmem.WithLatency(inmemLatency))
	if err != nil {
		return err
	}
	defer c.Close()
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	members := map[string]*inmem.Elector{}
	var all []*inmem.Elector
	hist.Start = mono.Now()
	for i := range r.cfg.Candidates {
		id := fmt.Sprintf("m%d", i+1)
		cand := newCandidate(id, 0, r.cfg.Work, localSink{r: r.reg, client: id})
		e, err := c.Join(election.WithID(id), election.WithAfterRenew(cand.afterRenew))
		if err != nil {
			return err
		}
		members[id] = e
		all = append(all, e)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cand.rep.flush(5 * time.Second)
			_ = election.Run(rctx, e, cand.callbacks())
		}()
	}
	leader := func() (string, *inmem.Elector) {
		if ev, ok := r.reg.Leader(); ok {
			if e := members[ev.Candidate]; e != nil {
				return ev.Candidate, e
			}
		}
		i := r.pick.Intn(len(all))
		return all[i].ID(), all[i]
	}
	if _, err := r.awaitLeader(ctx, "", 30*time.Second); err != nil {
		return fmt.Errorf("no first leader: %w", err)
	}
	inject := func(ctx context.Context, kind string) error {
		id, e := leader()
		start := mono.Now()
		d := r.cfg.TTL + r.between(500*time.Millisecond, r.cfg.TTL+time.Second)
		switch kind {
		case Crash:
			if err := c.Crash(e); err != nil {
				return err
			}
			_ = sleep(ctx, d)
			if err := c.Recover(e); err != nil {
				return err
			}
		case Partition:
			var rest []*inmem.Elector
			for _, o := range all {
				if o != e {
					rest = append(rest, o)
				}
			}
			if err := c.Partition([]*inmem.Elector{e}, rest); err != nil {
				return err
			}
			_ = sleep(ctx, d)
			if err := c.Heal(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown fault %q", kind)
		}
		r.fault(nemesis.Fault{Kind: kind, Target: id, Start: start, End: mono.Now()})
		r.logf("%s: %s for %v", kind, id, d.Round(time.Millisecond))
		return ctx.Err()
	}
	if err := r.mixWith(ctx, inject); err != nil {
		return err
	}
	r.quiet(ctx)
	stop()
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}
