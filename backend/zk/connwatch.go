package zk

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election/internal/clock"
)

// connWatch is what the leaders on one connection share, however many
// Electors lead on it (10,000 leaders each polling and beating on its own
// would wake the process a million times a second and send 3,000
// heartbeats a second):
//
//   - one poller reads the connection's state and session every
//     statePoll and wakes the leaders when either changes;
//   - one heartbeat tick, every shortest heartbeat interval of its
//     leaders, on which they all beat; the heartbeats of one tick go out
//     together, as one multi of every leader's check (each leader's own
//     node at its own version, as a lone heartbeat checks it);
//   - the last confirmation of its session through the ensemble's
//     leader: a heartbeat multi that succeeded, or a sync sent on each
//     tick while a candidate on it waits near the head (watchNext), whose
//     send time a hand-over's successor counts its Term from
//     (takeHandover), so that no round trip to the ensemble's leader is
//     left on the handover's path.
type connWatch struct {
	conn      *gozk.Conn
	users     int                   // leaders using it (guarded by connWatches.mu)
	intervals map[time.Duration]int // their heartbeat intervals (guarded by connWatches.mu)
	stop      chan struct{}

	mu       sync.Mutex
	changed  chan struct{} // closed at the next change, then replaced
	tick     chan struct{} // closed at the next heartbeat tick, then replaced
	interval time.Duration // the shortest heartbeat interval of its leaders
	next     *beatBatch    // the heartbeats not sent yet

	nexts atomic.Int32 // candidates waiting near the head on it (watchNext)
	// The last confirmation of session confSid: a request sent at
	// confAt that the ensemble's leader checked the session for and
	// answered. syncing is closed when the sync in flight (sent at
	// syncSent for session syncSid) is answered; nil when none is.
	confSid  int64
	confAt   time.Time
	syncing  chan struct{}
	syncSid  int64
	syncSent time.Time
}

// beatBatch is the heartbeats of one tick: one multi (or one per
// maxBeatOps) of every joining leader's check.
type beatBatch struct {
	reqs []*gozk.CheckVersionRequest
	errs []error
	sent time.Time
	done chan struct{}
}

// maxBeatOps bounds the checks in one multi (ZooKeeper bounds a request's
// size, 1 MiB by default).
const maxBeatOps = 1000

// gather is how long a batch waits for the leaders of its tick to join:
// a fiftieth of the interval, at most 10 ms (as etcd's Session).
func (w *connWatch) gather() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return min(w.interval/50, 10*time.Millisecond)
}

// errBatchFailed: another check of the heartbeat's multi failed, so this
// one's outcome is not known; it is retried.
var errBatchFailed = errors.New("another heartbeat of the same multi failed; retrying")

var connWatches = struct {
	sync.Mutex
	m map[*gozk.Conn]*connWatch
}{m: map[*gozk.Conn]*connWatch{}}

// watchConn returns conn's watch for a leader beating every interval,
// starting it for its first user; each call is paired with a release.
func watchConn(conn *gozk.Conn, interval time.Duration) *connWatch {
	connWatches.Lock()
	defer connWatches.Unlock()
	w := connWatches.m[conn]
	if w == nil {
		w = &connWatch{conn: conn, stop: make(chan struct{}), intervals: map[time.Duration]int{},
			changed: make(chan struct{}), tick: make(chan struct{})}
		connWatches.m[conn] = w
		// What the first user reads after this differs from this only by
		// a change the loop reports.
		go w.loop(conn.State(), conn.SessionID())
	}
	w.users++
	w.intervals[interval]++
	w.setInterval()
	return w
}

// watchNext returns conn's watch for a candidate near the head, whose
// predecessor may hand over to it: while it is registered the watch
// syncs through the ensemble's leader on each tick (at least every
// interval), and at once if no confirmation is fresh. Pair with
// releaseNext.
func watchNext(conn *gozk.Conn, interval time.Duration) *connWatch {
	w := watchConn(conn, interval)
	w.nexts.Add(1)
	if at, wait := w.confirmation(conn.SessionID(), clock.Now().Add(-interval)); at.IsZero() && wait == nil {
		w.startSync()
	}
	return w
}

// releaseNext ends a watchNext.
func (w *connWatch) releaseNext(interval time.Duration) {
	w.nexts.Add(-1)
	w.release(interval)
}

// confirmation returns the send time of the last confirmation of session
// sid if it was sent after notBefore; else, if a sync sent after
// notBefore is in flight, a channel closed at its answer (then ask
// again); else neither.
func (w *connWatch) confirmation(sid int64, notBefore time.Time) (time.Time, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case sid == 0:
	case w.confSid == sid && w.confAt.After(notBefore):
		return w.confAt, nil
	case w.syncing != nil && w.syncSid == sid && w.syncSent.After(notBefore):
		return time.Time{}, w.syncing
	}
	return time.Time{}, nil
}

// confirmed waits for a confirmation of session sid sent after
// notBefore, a sync in flight included, and returns its send time, or
// the zero time if there is none (or ctx ended, or stop or closing was
// closed, first).
func (w *connWatch) confirmed(ctx context.Context, stop, closing <-chan struct{}, sid int64, notBefore time.Time) time.Time {
	at, wait := w.confirmation(sid, notBefore)
	if wait == nil {
		return at
	}
	select {
	case <-wait:
	case <-ctx.Done():
		return time.Time{}
	case <-stop:
		return time.Time{}
	case <-closing:
		return time.Time{}
	}
	at, _ = w.confirmation(sid, notBefore)
	return at
}

// confirm records a confirmation of session sid sent at sent. The caller
// has checked that the connection's session is still sid once answered
// (a request queued while disconnected goes out after the reconnect, on
// the session the connection has then).
func (w *connWatch) confirm(sid int64, sent time.Time) {
	if sid == 0 {
		return
	}
	w.mu.Lock()
	if w.confSid != sid || sent.After(w.confAt) {
		w.confSid, w.confAt = sid, sent
	}
	w.mu.Unlock()
}

// startSync sends a sync, unless one is in flight: the server forwards it
// to the ensemble's leader, which answers only while the session lives.
func (w *connWatch) startSync() {
	sid := w.conn.SessionID()
	if sid == 0 {
		return
	}
	w.mu.Lock()
	if w.syncing != nil {
		w.mu.Unlock()
		return
	}
	done := make(chan struct{})
	w.syncing, w.syncSid, w.syncSent = done, sid, clock.Now()
	sent := w.syncSent
	w.mu.Unlock()
	// The goroutine is the connection's, not an Elector's: it ends with
	// the sync's answer, which a closed connection gives at once.
	go func() {
		_, err := w.conn.Sync("/")
		if err == nil && w.conn.SessionID() == sid {
			w.confirm(sid, sent)
		}
		w.mu.Lock()
		w.syncing = nil
		w.mu.Unlock()
		close(done)
	}()
}

// release ends one user's use of w; the last stops it.
func (w *connWatch) release(interval time.Duration) {
	connWatches.Lock()
	defer connWatches.Unlock()
	if w.intervals[interval]--; w.intervals[interval] == 0 {
		delete(w.intervals, interval)
	}
	w.setInterval()
	if w.users--; w.users == 0 {
		delete(connWatches.m, w.conn)
		close(w.stop)
	}
}

// setInterval makes the tick's interval the shortest of the users'.
func (w *connWatch) setInterval() {
	var d time.Duration
	for i := range w.intervals {
		if d == 0 || i < d {
			d = i
		}
	}
	w.mu.Lock()
	w.interval = d
	w.mu.Unlock()
}

// changes returns a channel closed when the connection's state or session
// changes after this call: take it before reading them.
func (w *connWatch) changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// ticks returns the channel closed at the next heartbeat tick.
func (w *connWatch) ticks() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tick
}

func (w *connWatch) loop(st gozk.State, sid int64) {
	t := time.NewTicker(statePoll)
	defer t.Stop()
	last := clock.Now()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		if s, id := w.conn.State(), w.conn.SessionID(); s != st || id != sid {
			st, sid = s, id
			close(w.changed)
			w.changed = make(chan struct{})
		}
		ticked := false
		if w.interval > 0 && clock.Since(last) >= w.interval-statePoll/2 {
			last = clock.Now()
			close(w.tick)
			w.tick = make(chan struct{})
			ticked = true
		}
		w.mu.Unlock()
		if ticked && w.nexts.Load() > 0 {
			w.startSync()
		}
	}
}

// beat sends a heartbeat of node at version with the others of its tick,
// and returns the send time of the multi that carried it (never before
// the call) and its outcome: nil, the check's own error (ErrNoNode,
// ErrBadVersion), errBatchFailed, or the multi's error.
func (w *connWatch) beat(node string, version int32) (time.Time, error) {
	w.mu.Lock()
	b := w.next
	if b == nil {
		b = &beatBatch{done: make(chan struct{})}
		w.next = b
		go w.send(b)
	}
	i := len(b.reqs)
	b.reqs = append(b.reqs, &gozk.CheckVersionRequest{Path: node, Version: version})
	w.mu.Unlock()
	<-b.done
	return b.sent, b.errs[i]
}

// send sends b once the others of its tick had a moment to join.
func (w *connWatch) send(b *beatBatch) {
	defer close(b.done)
	time.Sleep(w.gather())
	w.mu.Lock()
	if w.next == b {
		w.next = nil
	}
	b.sent = clock.Now()
	reqs := b.reqs
	w.mu.Unlock()
	sid := w.conn.SessionID()
	b.errs = make([]error, len(reqs))
	for lo := 0; lo < len(reqs); lo += maxBeatOps {
		chunk := reqs[lo:min(lo+maxBeatOps, len(reqs))]
		ops := make([]any, len(chunk))
		for j, r := range chunk {
			ops[j] = r
		}
		res, err := w.conn.Multi(ops...)
		if err == nil && w.conn.SessionID() == sid {
			w.confirm(sid, b.sent) // the leader checked the session
		}
		for j := range chunk {
			switch {
			case err == nil:
			case len(res) != len(chunk):
				b.errs[lo+j] = err // the multi failed as a whole
			case errors.Is(res[j].Error, gozk.ErrNoNode), errors.Is(res[j].Error, gozk.ErrBadVersion):
				b.errs[lo+j] = res[j].Error
			default:
				b.errs[lo+j] = errBatchFailed
			}
		}
	}
}
