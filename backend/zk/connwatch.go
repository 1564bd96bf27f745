package zk

import (
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// connWatch reads one connection's state and session every statePoll for
// all the leaders on it, and wakes them when either changes: one poller
// per connection, however many Electors lead on it (10,000 leaders each
// polling its own would wake the process a million times a second).
type connWatch struct {
	conn  *gozk.Conn
	users int // leaders using it (guarded by connWatches.mu)
	stop  chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed at the next change, then replaced
}

var connWatches = struct {
	sync.Mutex
	m map[*gozk.Conn]*connWatch
}{m: map[*gozk.Conn]*connWatch{}}

// watchConn returns conn's watch, starting it for its first user; each
// call is paired with a release.
func watchConn(conn *gozk.Conn) *connWatch {
	connWatches.Lock()
	defer connWatches.Unlock()
	w := connWatches.m[conn]
	if w == nil {
		w = &connWatch{conn: conn, stop: make(chan struct{}), changed: make(chan struct{})}
		connWatches.m[conn] = w
		// What the first user reads after this differs from this only by
		// a change the loop reports.
		go w.loop(conn.State(), conn.SessionID())
	}
	w.users++
	return w
}

// release ends one user's use of w; the last stops it.
func (w *connWatch) release() {
	connWatches.Lock()
	defer connWatches.Unlock()
	if w.users--; w.users == 0 {
		delete(connWatches.m, w.conn)
		close(w.stop)
	}
}

// changes returns a channel closed when the connection's state or session
// changes after this call: take it before reading them.
func (w *connWatch) changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *connWatch) loop(st gozk.State, sid int64) {
	t := time.NewTicker(statePoll)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if s, id := w.conn.State(), w.conn.SessionID(); s != st || id != sid {
			st, sid = s, id
			w.mu.Lock()
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
		}
	}
}
