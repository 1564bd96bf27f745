package postgres

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A listener is the one connection of a pool's Electors that LISTENs: it
// is opened from the pool's configuration but is not one of the pool's
// connections, so it is never recycled, and it decides nothing: a
// notification only makes a candidate read or write the election's rows
// sooner. Every Elector made on one pool shares it (a process with 1,000
// candidates holds one listening connection, not 1,000), and each
// subscribes to the channels it needs: a waiting candidate to its own, a
// leader and an observer to their election's.
//
// When the connection drops, every subscriber is woken (a notification
// may have been lost, so each reads the election again), and the listener
// connects again, with a growing pause, and LISTENs again to every
// channel; then it wakes every subscriber once more. Meanwhile candidates
// wait on their fallback timers.
type listener struct {
	cfg  *pgx.ConnConfig
	log  *slog.Logger
	refs int // guarded by listeners.mu

	mu        sync.Mutex
	subs      map[string]map[*sub]struct{}
	listening map[string]bool // channels LISTENed on the current connection
	interrupt context.CancelFunc
	dirty     bool

	drops atomic.Int64 // connections lost or refused
	stop  context.CancelFunc
	done  chan struct{}
}

// sub is one subscription: C receives a value (never blocking the
// listener) for each notification on its channel and each reconnection.
type sub struct {
	channel string
	C       chan struct{}
	ready   chan struct{} // closed once its channel is LISTENed on
	once    sync.Once
}

func (s *sub) wake() {
	select {
	case s.C <- struct{}{}:
	default:
	}
}

// listeners holds the listener of each pool with Electors.
var listeners struct {
	mu sync.Mutex
	m  map[*pgxpool.Pool]*listener
}

// listenerFor returns pool's listener, starting it if needed; each call
// must be paired with a release.
func listenerFor(pool *pgxpool.Pool, log *slog.Logger) *listener {
	listeners.mu.Lock()
	defer listeners.mu.Unlock()
	if listeners.m == nil {
		listeners.m = map[*pgxpool.Pool]*listener{}
	}
	l := listeners.m[pool]
	if l == nil {
		ctx, stop := context.WithCancel(context.Background())
		l = &listener{cfg: pool.Config().ConnConfig.Copy(), log: log, subs: map[string]map[*sub]struct{}{},
			listening: map[string]bool{}, stop: stop, done: make(chan struct{})}
		listeners.m[pool] = l
		go l.run(ctx)
	}
	l.refs++
	return l
}

// release drops a reference to pool's listener; the last one stops it.
func (l *listener) release(pool *pgxpool.Pool) {
	listeners.mu.Lock()
	l.refs--
	last := l.refs == 0
	if last {
		delete(listeners.m, pool)
	}
	listeners.mu.Unlock()
	if last {
		l.stop()
		<-l.done
	}
}

// subscribe starts a subscription to channel.
func (l *listener) subscribe(channel string) *sub {
	s := &sub{channel: channel, C: make(chan struct{}, 1), ready: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs[channel] == nil {
		l.subs[channel] = map[*sub]struct{}{}
	}
	l.subs[channel][s] = struct{}{}
	if l.listening[channel] {
		s.once.Do(func() { close(s.ready) })
	} else {
		l.pokeLocked()
	}
	return s
}

// unsubscribe ends s; a nil s is ignored.
func (l *listener) unsubscribe(s *sub) {
	if s == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.subs[s.channel], s)
	if len(l.subs[s.channel]) == 0 {
		delete(l.subs, s.channel)
		l.pokeLocked()
	}
}

// awaitReady waits, at most d, until s's channel is LISTENed on.
func (s *sub) awaitReady(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ready:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (l *listener) pokeLocked() {
	l.dirty = true
	if l.interrupt != nil {
		l.interrupt()
	}
}

// run keeps a connection LISTENing to the subscribed channels until ctx
// ends.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	pause := 10 * time.Millisecond
	again := false // a connection was lost before this one
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := pgx.ConnectConfig(cctx, l.cfg)
		cancel()
		if err == nil {
			pause = 10 * time.Millisecond
			err = l.serve(ctx, conn, again)
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		again = true
		l.drops.Add(1)
		l.log.Warn("postgres election: the listening connection failed; candidates poll until it is back", "err", err, "retry", pause)
		l.mu.Lock()
		l.listening = map[string]bool{}
		l.wakeAllLocked()
		l.mu.Unlock()
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
		pause = min(2*pause, time.Second)
	}
}

func (l *listener) wakeAllLocked() {
	for _, ss := range l.subs {
		for s := range ss {
			s.wake()
		}
	}
}

// serve LISTENs on conn and delivers its notifications until conn fails
// or ctx ends.
func (l *listener) serve(ctx context.Context, conn *pgx.Conn, again bool) error {
	first := again
	for {
		l.mu.Lock()
		var add, drop []string
		for ch := range l.subs {
			if !l.listening[ch] {
				add = append(add, ch)
			}
		}
		for ch := range l.listening {
			if l.subs[ch] == nil {
				drop = append(drop, ch)
			}
		}
		l.dirty = false
		l.mu.Unlock()
		for _, ch := range add {
			if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return err
			}
		}
		for _, ch := range drop {
			if _, err := conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return err
			}
		}
		l.mu.Lock()
		for _, ch := range add {
			l.listening[ch] = true
			for s := range l.subs[ch] {
				s.once.Do(func() { close(s.ready) })
			}
		}
		for _, ch := range drop {
			delete(l.listening, ch)
		}
		if first {
			// Back after a failure: what was sent meanwhile is lost.
			l.wakeAllLocked()
			first = false
		}
		if l.dirty {
			l.mu.Unlock()
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		l.interrupt = cancel
		l.mu.Unlock()
		n, err := conn.WaitForNotification(wctx)
		l.mu.Lock()
		l.interrupt = nil
		l.mu.Unlock()
		interrupted := wctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			for s := range l.subs[n.Channel] {
				s.wake()
			}
			l.mu.Unlock()
		case ctx.Err() != nil:
			return ctx.Err()
		case interrupted && !conn.IsClosed():
			// A subscription changed: LISTEN or UNLISTEN, then wait again.
		default:
			if err == nil {
				err = errors.New("connection closed")
			}
			return err
		}
	}
}
