package zk

import (
	"fmt"
	"reflect"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
)

// The TTL of an Elector is the session timeout the server granted its
// connection, which a server clamps to its bounds (2–20 ticks by default),
// so it may differ from the one the client asked for. go-zookeeper keeps
// the granted timeout in an unexported field of Conn, sessionTimeoutMs,
// written when a session is established (before the state becomes
// StateHasSession), and otherwise only prints it in its log line
// "authenticated: id=…, timeout=…". This package reads that field by name
// (reflect, read-only): on a Conn whose state is StateHasSession, so the
// read follows the write of the session it sees.
//
// The client asks for the granted timeout again on every reconnect, so
// the timeout changes only when a server with other bounds answers (an
// ensemble whose members are configured differently): a leader that finds
// its session's timeout shorter than its Term's TTL ends its Term, and the
// next Term counts with the new timeout.

// timeoutField is the index of Conn's session timeout field, or nil when
// the client in use keeps it elsewhere.
var timeoutField = func() []int {
	f, ok := reflect.TypeFor[gozk.Conn]().FieldByName("sessionTimeoutMs")
	if !ok || f.Type.Kind() != reflect.Int32 {
		return nil
	}
	return f.Index
}()

// sessionTimeout returns the session timeout the server granted conn's
// current session, and false when conn has no session now (or the client
// does not keep the timeout where timeoutField finds it).
func sessionTimeout(conn *gozk.Conn) (time.Duration, bool) {
	if timeoutField == nil || conn.State() != gozk.StateHasSession {
		return 0, false
	}
	ms := reflect.ValueOf(conn).Elem().FieldByIndex(timeoutField).Int()
	// Server takes the lock the client takes, on its next state change,
	// before it establishes the next session and writes the field again:
	// the read is ordered before that write.
	_ = conn.Server()
	if ms <= 0 || conn.State() != gozk.StateHasSession {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// givenTTL returns the TTL opts set, or 0 when none of them sets it
// (WithTTL was not given).
func givenTTL(opts []election.Option) time.Duration {
	var o election.Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o.TTL
}

// withSessionTTL returns o with the TTL the session timeout granted, or
// an *election.OptionError naming both when the caller set WithTTL
// (given) to another value, or when granted is out of election's bounds.
func withSessionTTL(o election.Options, given, granted time.Duration) (election.Options, error) {
	if given != 0 && given != granted {
		return o, &election.OptionError{Field: "TTL", Value: given.String(),
			Reason: fmt.Sprintf("differs from the session timeout the ZooKeeper server granted the connection, %v (servers clamp the asked timeout to their bounds, 2–20 ticks by default): leave WithTTL out to use the granted timeout, or set it to %v", granted, granted)}
	}
	o.TTL = granted
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("zk election: the session timeout %v the ZooKeeper server granted, as the TTL: %w", granted, err)
	}
	return o, nil
}

// resolveTTL returns e's options for a Term on session: with the TTL the
// session timeout conn's session was granted, read now when conn has that
// session, else the one read last. When none was ever read, an error
// wrapping errNodeGone: Campaign makes a new node once connected. With a
// client whose timeout cannot be read, e's own options (WithTTL's).
func (e *Elector) resolveTTL(session int64) (election.Options, error) {
	d, ok := sessionTimeout(e.conn)
	if ok && e.conn.SessionID() == session {
		e.granted.Store(int64(d))
	} else {
		d = time.Duration(e.granted.Load())
	}
	switch {
	case d != 0:
		return withSessionTTL(e.o, e.ttlGiven, d)
	case timeoutField == nil:
		return e.o, nil
	}
	return e.o, fmt.Errorf("%w: the session timeout of session %#x is not known yet (the connection was lost)", errNodeGone, session)
}

// checkTTL checks the session timeout conn was granted against WithTTL,
// when conn has a session: Campaign's first step, so that a candidacy
// whose Term would be refused makes no node. On a conn with no session,
// Campaign checks once its node is made (resolveTTL).
func (e *Elector) checkTTL() error {
	d, ok := sessionTimeout(e.conn)
	if !ok {
		return nil
	}
	e.granted.Store(int64(d))
	_, err := withSessionTTL(e.o, e.ttlGiven, d)
	return err
}
