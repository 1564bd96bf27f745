package harness

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
	"github.com/electkit/election/classic/sim"
)

func numCPU() int { return runtime.NumCPU() }

func (r *run) inprocess(ctx context.Context) error {
	var errs []error
	for _, n := range []int{5, 100} {
		if err := r.inmemHandover(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range []struct {
		alg string
		n   int
	}{{"ring", r.sz.ringN}, {"bully", r.sz.bullyN}} {
		if err := r.simThroughput(c.alg, c.n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// inmemHandover: backend/inmem, ring algorithm, n members at the default
// timing, no network latency: Resign → the next leader's Campaign returns.
func (r *run) inmemHandover(ctx context.Context, n int) error {
	r.logf("in process: backend/inmem ring handover, N = %d, %d samples", n, r.sz.inmemSamples)
	c, err := inmem.NewCluster(inmem.Ring)
	if err != nil {
		return err
	}
	defer c.Close()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type res struct {
		e   election.Elector
		err error
	}
	ch := make(chan res, n)
	campaign := func(e election.Elector) {
		go func() {
			_, err := e.Campaign(cctx)
			ch <- res{e, err}
		}()
	}
	for i := range n {
		e, err := c.Join(election.WithID(fmt.Sprintf("c%d", i)), election.WithPriority(int64(i)))
		if err != nil {
			return err
		}
		campaign(e)
	}
	next := func() (election.Elector, error) {
		select {
		case w := <-ch:
			return w.e, w.err
		case <-time.After(time.Minute):
			return nil, errors.New("inmem: no leader within a minute")
		}
	}
	leader, err := next()
	if err != nil {
		return err
	}
	var lat []float64
	for range r.sz.inmemSamples {
		start := time.Now()
		if err := leader.Resign(ctx); err != nil {
			return err
		}
		campaign(leader)
		if leader, err = next(); err != nil {
			return err
		}
		lat = append(lat, float64(time.Since(start).Microseconds())/1000)
	}
	d := &Dist{MS: lat}
	r.rep.InProcess = append(r.rep.InProcess,
		&InProcRow{What: fmt.Sprintf("backend/inmem handover p50, ring, N = %d", n), Value: d.Q(0.5), Unit: "ms", Detail: fmt.Sprintf("p90 %s ms, p99 %s ms, %d samples; default timing, no latency", ms(d.Q(0.9)), ms(d.Q(0.99)), len(lat))})
	cancel()
	return nil
}

// simThroughput runs the algorithm's worst failure-free case in the
// simulator and reports simulated messages per second of wall time.
func (r *run) simThroughput(name string, n int) error {
	a, err := sim.Lookup(name)
	if err != nil {
		return err
	}
	if a.MaxN > 0 {
		n = min(n, a.MaxN)
	}
	r.logf("in process: classic/sim %s, N = %d, worst case", name, n)
	c := a.Worst(n)
	t0 := time.Now()
	s, stop, err := a.RunCase(n, c, sim.Config{Seed: 1, MinDelay: 1, MaxDelay: 1}, 5, 20)
	el := time.Since(t0)
	if err != nil {
		return err
	}
	if stop != sim.StopQuiet {
		return fmt.Errorf("sim %s: stopped %v", name, stop)
	}
	msgs := s.Counts().Total().Delivered
	r.rep.InProcess = append(r.rep.InProcess, &InProcRow{
		What: fmt.Sprintf("classic/sim %s, N = %d, worst case", name, n), Value: float64(msgs) / el.Seconds(), Unit: "simulated msgs/s",
		Detail: fmt.Sprintf("%s; %d messages in %v (node setup included)", c.What, msgs, el.Round(time.Millisecond)),
	})
	return nil
}
