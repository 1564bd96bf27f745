package zk

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/lograte"
	"github.com/electkit/election/internal/skeleton"
)

// DefaultDialWait bounds how long Dial waits for a session when its ctx
// has no deadline (DialConfig.Wait changes it).
const DefaultDialWait = 15 * time.Second

// DialConfig says how Dial connects.
type DialConfig struct {
	// Servers lists the ensemble's client addresses, "host:port". Required.
	Servers []string
	// Digest, when set, is "user:password": the connection authenticates
	// with the digest scheme before the Elector uses it (and again on every
	// reconnect).
	Digest string
	// Wait bounds how long Dial waits for a session when its ctx has no
	// deadline. Default DefaultDialWait (15 s); a ctx with a deadline is
	// used as it is.
	Wait time.Duration
	// Config holds the Elector's ZooKeeper-specific settings.
	Config
}

// Dial connects to a ZooKeeper ensemble, asking for a session timeout
// equal to the TTL option (DefaultTTL without WithTTL), waits until the
// session is established, and returns an Elector on that connection,
// which it owns: Close closes it.
//
// The TTL is the session timeout the server granted, as with New: servers
// clamp the asked timeout to their bounds (2–20 ticks by default), so
// without WithTTL the TTL is whatever the server granted, and with
// WithTTL a server that granted another timeout makes Dial fail with an
// *election.OptionError naming both.
//
// Dial waits until ctx ends, or for DialConfig.Wait (default 15 s) when
// ctx has no deadline. If no server answered by then, its error names the
// servers it tried and the last failure, and wraps ctx's error
// (context.DeadlineExceeded when the wait ran out). Its attempts, and the
// client's later connection failures, are logged through the Logger
// option (the client's own logger is not used). Session events wake the
// leader at once, where an Elector of New notices a disconnect within a
// few milliseconds.
func Dial(ctx context.Context, dc DialConfig, name string, opts ...election.Option) (*Elector, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return nil, err
	}
	if len(dc.Servers) == 0 {
		return nil, &election.OptionError{Field: "Servers", Value: "[]", Reason: "at least one ZooKeeper server address is required"}
	}
	for _, s := range dc.Servers {
		if s == "" {
			return nil, &election.OptionError{Field: "Servers", Value: fmt.Sprintf("%q", dc.Servers), Reason: "must not contain an empty address"}
		}
	}
	if dc.Wait < 0 {
		return nil, &election.OptionError{Field: "Wait", Value: dc.Wait.String(), Reason: "must be 0 (the default, 15s) or positive"}
	}
	if err := backend.ValidateName(name); err != nil {
		return nil, err
	}
	cfg := dc.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, &election.OptionError{Field: "ctx", Value: "nil", Reason: "a context is required"}
	}
	wait := dc.Wait
	if wait == 0 {
		wait = DefaultDialWait
	}
	parent := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	sessionEvents := make(chan struct{}, 1)
	var lostSeen atomic.Bool
	established := make(chan struct{}, 1)
	log := &connLogger{log: o.Logger}
	log.dialing.Store(true)
	conn, _, err := gozk.Connect(dc.Servers, o.TTL, gozk.WithLogger(log), gozk.WithLogInfo(true),
		gozk.WithEventCallback(func(ev gozk.Event) {
			if ev.Type != gozk.EventSession {
				return
			}
			switch ev.State {
			case gozk.StateConnecting:
				log.tried(ev.Server)
			case gozk.StateHasSession:
				select {
				case established <- struct{}{}:
				default:
				}
			case gozk.StateDisconnected, gozk.StateExpired:
				lostSeen.Store(true)
			}
			select {
			case sessionEvents <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zk election: connecting to %v: %w", dc.Servers, err)
	}
	select {
	case <-ctx.Done():
		go conn.Close() // it waits up to a second for the server; Dial returns with ctx
		log.dialing.Store(false)
		cause := ctx.Err()
		within := "before ctx ended"
		if parent.Err() == nil {
			within = fmt.Sprintf("within %v (DialConfig.Wait)", wait)
		} else {
			cause = parent.Err()
		}
		return nil, fmt.Errorf("zk election: no ZooKeeper server answered %s (%s): %w", within, log.attempts(dc.Servers), cause)
	case <-established:
	}
	log.dialing.Store(false)
	if dc.Digest != "" {
		if err := conn.AddAuth("digest", []byte(dc.Digest)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zk election: digest authentication on %v: %w", dc.Servers, err)
		}
	}
	e, err := NewConfig(conn, name, cfg, opts...)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if e.o.TTL != o.TTL {
		o.Logger.Info("zk election: the server granted another session timeout than asked; it is the TTL", "asked", o.TTL, "granted", e.o.TTL)
	}
	e.ownsConn = true
	e.sessionEvents = sessionEvents
	e.lostSeen = &lostSeen
	return e, nil
}

// connLogger sends the ZooKeeper client's log to the Elector's logger:
// connection failures at info level (each one while Dial waits, then at
// most one per retryLogEvery), the rest at debug level. It keeps the
// servers tried and the last failure for Dial's error.
type connLogger struct {
	log     *slog.Logger
	dialing atomic.Bool
	limit   lograte.Limiter

	mu      sync.Mutex
	servers []string // tried, in the order first tried
	last    string   // the last failure
}

// tried records an attempt to connect to server.
func (l *connLogger) tried(server string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if server != "" && !slices.Contains(l.servers, server) {
		l.servers = append(l.servers, server)
	}
}

// attempts describes the attempts for an error: the servers tried (those
// configured when none was tried yet) and the last failure.
func (l *connLogger) attempts(configured []string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := "tried " + strings.Join(l.servers, ", ")
	if len(l.servers) == 0 {
		s = "servers " + strings.Join(configured, ", ") + ", none tried yet"
	}
	if l.last != "" {
		s += "; last failure: " + l.last
	}
	return s
}

func (l *connLogger) Printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(format, "failed to connect to ") && !strings.HasPrefix(format, "authentication failed") {
		l.log.Debug("zk client: " + msg)
		return
	}
	l.mu.Lock()
	l.last = msg
	if strings.HasPrefix(format, "failed to connect to ") && len(args) == 2 {
		l.last = fmt.Sprint(args[1]) // the dial's error names the server
	}
	l.mu.Unlock()
	if l.dialing.Load() {
		l.log.Info("zk election: Dial: no session yet; trying the next server", "failure", msg)
		return
	}
	if left, ok := l.limit.Allow(time.Now(), retryLogEvery); ok {
		l.log.Info("zk election: the ZooKeeper connection failed; the client tries the next server", "failure", msg, "left_out", left)
	}
}
