package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/record"
)

// preemption follows, for a leader made WithPreemption, the candidates
// queued above its key — those of strictly higher priority — through the
// leader's own watch, which covers them already (its range runs from its
// queue key to the leader key). Once one has been there PreemptAfter
// without a break, the leader hands over to the best of them (handOver),
// its Term ending with ErrPreempted.
type preemption struct {
	e     *Elector
	c     *candidacy
	hold  time.Duration
	mine  int64 // the leader's priority
	above map[string]*challenger
	timer *time.Timer
}

type challenger struct {
	kv    *mvccpb.KeyValue
	id    string
	since time.Time
}

func newPreemption(e *Elector, c *candidacy) *preemption {
	return &preemption{e: e, c: c, hold: e.o.PreemptAfter, mine: e.o.Priority} // above: made at the first challenger
}

func (p *preemption) on() bool { return p.hold > 0 }

func (p *preemption) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// fire returns the channel of the hold-off of the longest-waiting
// challenger, or nil.
func (p *preemption) fire() <-chan time.Time {
	if p.timer == nil {
		return nil
	}
	return p.timer.C
}

// challenges reports whether kv is a queue key of strictly higher priority
// than the leader's, under a lease.
func (p *preemption) challenges(kv *mvccpb.KeyValue) bool {
	key := string(kv.Key)
	if !strings.HasPrefix(key, p.e.lay.queue()) {
		return false
	}
	if lease, err := p.e.lay.queueLease(key); err != nil || kv.Lease != 0 && lease != kv.Lease {
		return false
	}
	pr, ok := p.e.lay.queuePriority(key)
	return ok && pr > p.mine
}

// event applies a watch event of a key other than the leader's own.
func (p *preemption) event(ev *clientv3.Event) {
	if !p.on() || !p.challenges(ev.Kv) {
		return
	}
	key := string(ev.Kv.Key)
	switch {
	case ev.Type == clientv3.EventTypeDelete:
		delete(p.above, key)
	case ev.Kv.Lease == 0:
		delete(p.above, key) // put again without a lease: it never leads
	case p.above[key] == nil:
		if p.above == nil {
			p.above = map[string]*challenger{}
		}
		p.above[key] = &challenger{kv: ev.Kv, id: record.ID(ev.Kv.Value), since: clock.Now()}
	}
	p.arm()
}

// reset replaces the challengers with those read (keys only) after the
// watch was opened again; those already known keep their time.
func (p *preemption) reset(kvs []*mvccpb.KeyValue) {
	now := clock.Now()
	next := map[string]*challenger{}
	for _, kv := range kvs {
		if kv.Lease == 0 || !p.challenges(kv) {
			continue
		}
		key := string(kv.Key)
		if old := p.above[key]; old != nil && old.kv.CreateRevision == kv.CreateRevision {
			next[key] = old
			continue
		}
		next[key] = &challenger{kv: kv, since: now}
	}
	p.above = next
	p.arm()
}

// arm sets the timer to the end of the earliest challenger's hold-off.
func (p *preemption) arm() {
	p.stop()
	p.timer = nil
	var first time.Time
	for _, ch := range p.above {
		if first.IsZero() || ch.since.Before(first) {
			first = ch.since
		}
	}
	if !first.IsZero() {
		p.timer = time.NewTimer(max(0, first.Add(p.hold).Sub(clock.Now())))
	}
}

// preempt hands the leadership to the best challenger that has waited the
// hold-off: the highest key, that is the highest priority, then the
// earliest arrival. It reports whether it handed over (the candidacy is
// over then, whatever became of the hand-over).
func (p *preemption) preempt(token int64) bool {
	now := clock.Now()
	var best *challenger
	for key, ch := range p.above {
		if now.Sub(ch.since) >= p.hold && (best == nil || key > string(best.kv.Key)) {
			best = ch
		}
	}
	if best == nil {
		p.arm()
		return false
	}
	id := best.id
	if id == "" {
		id = string(best.kv.Key)
	}
	pr, _ := p.e.lay.queuePriority(string(best.kv.Key))
	cause := fmt.Errorf("%w: %s (priority %d, above %d) waited %v", election.ErrPreempted, id, pr, p.mine, p.hold)
	ctx, cancel := context.WithTimeout(p.e.background(), 2*p.e.o.Window())
	defer cancel()
	if err := p.e.handOver(ctx, p.c, best.kv, id, cause); err != nil {
		p.e.o.Logger.Warn("etcd election: handing over to a preempting candidate failed; the next leader comes from the normal order", "token", token, "to", id, "err", err)
	}
	return true
}
