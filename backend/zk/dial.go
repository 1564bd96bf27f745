package zk

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/skeleton"
)

// DialConfig says how Dial connects.
type DialConfig struct {
	// Servers lists the ensemble's client addresses, "host:port". Required.
	Servers []string
	// Digest, when set, is "user:password": the connection authenticates
	// with the digest scheme before the Elector uses it (and again on every
	// reconnect).
	Digest string
	// Config holds the Elector's ZooKeeper-specific settings.
	Config
}

// Dial connects to a ZooKeeper ensemble with a session timeout equal to the
// TTL option, waits until the session is established (or ctx ends), and
// returns an Elector on that connection, which it owns: Close closes it.
//
// The server may grant a shorter session timeout than asked (servers clamp
// it to 2–20 ticks); Dial then uses the granted one as the TTL, since a
// Term must end before the server can expire the session, and logs that it
// did. Session events wake the leader at once, where an Elector of New
// notices a disconnect within a few milliseconds.
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
	sessionEvents := make(chan struct{}, 1)
	var lostSeen atomic.Bool
	granted := make(chan time.Duration, 1)
	log := &connLogger{log: o.Logger, granted: granted}
	conn, _, err := gozk.Connect(dc.Servers, o.TTL, gozk.WithLogger(log), gozk.WithLogInfo(true),
		gozk.WithEventCallback(func(ev gozk.Event) {
			if ev.Type != gozk.EventSession {
				return
			}
			if ev.State == gozk.StateDisconnected || ev.State == gozk.StateExpired {
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
	// The client logs the granted timeout once the session is established.
	select {
	case <-ctx.Done():
		go conn.Close() // it waits up to a second for the server; Dial returns with ctx
		return nil, ctx.Err()
	case g := <-granted:
		if g < o.TTL {
			o.Logger.Warn("zk election: the server granted a shorter session timeout than the TTL; using it as the TTL", "ttl", o.TTL, "granted", g)
			opts = append(opts, election.WithTTL(g))
			if o, err = election.NewOptions(opts...); err != nil {
				conn.Close()
				return nil, fmt.Errorf("zk election: the session timeout %v granted by the server: %w", g, err)
			}
		}
	}
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
	e.ownsConn = true
	e.sessionEvents = sessionEvents
	e.lostSeen = &lostSeen
	return e, nil
}

// connLogger sends the ZooKeeper client's log to the Elector's logger at
// debug level, and picks from it the session timeout the server granted
// (the client logs it on each new session, and exposes it nowhere else).
type connLogger struct {
	log     *slog.Logger
	granted chan time.Duration
}

func (l *connLogger) Printf(format string, args ...any) {
	if format == "authenticated: id=%d, timeout=%d" && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			select {
			case <-l.granted: // keep only the newest
			default:
			}
			l.granted <- time.Duration(ms) * time.Millisecond
		}
	}
	l.log.Debug("zk client: " + fmt.Sprintf(format, args...))
}
