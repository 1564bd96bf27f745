package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// Leader implements election.Elector: one read of the election's row; a
// leadership whose lease has lapsed on the server's clock is none.
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return election.Leader{}, err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return election.Leader{}, election.ErrClosed
	}
	if err := e.ensureSchema(ctx); err != nil {
		return election.Leader{}, err
	}
	l, _, err := e.readLeader(ctx)
	if err != nil {
		return election.Leader{}, e.ctxErr(ctx, err)
	}
	if l.IsZero() {
		return election.Leader{}, fmt.Errorf("%w: postgres election %q", election.ErrNoLeader, e.name)
	}
	return l, nil
}

// Observe implements election.Elector. One goroutine per Elector reads
// the election's row when it is told the row changed (a notification on
// the election's channel, sent by a trigger on every change but a
// renewal), when the lease it read lapses, and every TTL as a fallback;
// all of the Elector's streams share it.
func (e *Elector) Observe(ctx context.Context) <-chan election.Leader {
	if ctx == nil {
		return watch.Closed()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return watch.Closed()
	}
	return e.obs.Stream(ctx, e.closing, &e.wg, e.watchLeader)
}

func (e *Elector) watchLeader() {
	es := e.lst.subscribe(e.elChan)
	as := e.lst.subscribe(e.allChan)
	defer e.lst.unsubscribe(es)
	defer e.lst.unsubscribe(as)
	es.awaitReady(e.bg, listenWait)
	for e.bg.Err() == nil {
		d := e.o.TTL
		if err := e.ensureSchema(e.bg); err != nil {
			e.logRetry("observing", err)
			d = retryDelay
		} else if l, left, err := e.readLeader(e.bg); err != nil {
			e.logRetry("observing", err)
			d = retryDelay
		} else {
			e.obs.Set(l)
			if !l.IsZero() {
				d = min(d, time.Duration(left*float64(time.Millisecond))+time.Millisecond)
			}
		}
		timer := time.NewTimer(d)
		select {
		case <-es.C:
		case <-as.C:
		case <-timer.C:
		case <-e.bg.Done():
		}
		timer.Stop()
	}
}

// Candidates implements backend.Lister: one read of the waiting
// candidates whose heartbeats are current, in the order they would lead.
func (e *Elector) Candidates(ctx context.Context) ([]election.Candidate, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return nil, err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, election.ErrClosed
	}
	if err := e.ensureSchema(ctx); err != nil {
		return nil, err
	}
	e.statements.Add(1)
	rows, err := e.pool.Query(ctx, "SELECT id, value, priority FROM "+e.schema+".candidates "+
		"WHERE name = $1 AND expires > clock_timestamp() ORDER BY priority DESC, arrival", e.name)
	if err != nil {
		return nil, e.ctxErr(ctx, e.wrap("listing the candidates", err))
	}
	defer rows.Close()
	var cs []election.Candidate
	for rows.Next() {
		var c election.Candidate
		if err := rows.Scan(&c.ID, &c.Value, &c.Priority); err != nil {
			return nil, e.wrap("listing the candidates", err)
		}
		if len(c.Value) == 0 {
			c.Value = nil
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		return nil, e.ctxErr(ctx, e.wrap("listing the candidates", err))
	}
	return cs, nil
}
