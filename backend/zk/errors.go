package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
)

// This file is the one place that decides which errors of the ZooKeeper
// client end a Campaign and which are waited out.
//
// Final: the connection is closed (the client answers ErrClosing, or
// ErrConnectionClosed to every request once Close has run), or the server
// refuses this client for good (no auth for the path, failed
// authentication, an invalid ACL or path). Retrying them would spin
// silently, so Campaign returns them, wrapped, with the path.
//
// Retried: a lost connection the client is re-establishing (ErrNoServer, a
// request cut off by a disconnect), a session the client is replacing.
// Each is logged at most once per retryLogEvery with a count of those not
// logged, so a retry is never silent and never floods the log.

// retryLogEvery bounds how often an Elector logs a retried error.
const retryLogEvery = 5 * time.Second

// finalErr returns the error to end with if err, from a request about
// what, is final; nil if it may pass by retrying.
func (e *Elector) finalErr(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gozk.ErrClosing), errors.Is(err, gozk.ErrConnectionClosed) && e.connClosed():
		return fmt.Errorf("%w: zk election %s: %s: the ZooKeeper connection was closed", election.ErrSessionLost, e.path, what)
	case errors.Is(err, gozk.ErrNoAuth), errors.Is(err, gozk.ErrAuthFailed), errors.Is(err, gozk.ErrInvalidACL),
		errors.Is(err, gozk.ErrBadArguments), errors.Is(err, gozk.ErrInvalidPath):
		return fmt.Errorf("zk election %s: %s: %w", e.path, what, err)
	}
	return nil
}

// connClosed reports whether the connection was closed for good. The
// client has no accessor for it: a closed Conn stays Disconnected and
// answers every request at once with ErrConnectionClosed, where a live one
// that lost its server is Connecting within a moment and holds requests
// until it reconnects. So: Disconnected, and a probe refused at once.
func (e *Elector) connClosed() bool {
	if e.conn.State() != gozk.StateDisconnected {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var err error
	if derr := e.do(ctx, nil, func() { _, _, err = e.conn.Exists("/") }); derr != nil {
		return false // held: a connection being re-established
	}
	return (errors.Is(err, gozk.ErrConnectionClosed) || errors.Is(err, gozk.ErrClosing)) && e.conn.State() == gozk.StateDisconnected
}

// retryLog logs that what failed with err and will be retried, unless a
// line was logged less than retryLogEvery ago (then it is counted, and
// the count goes with the next line).
func (e *Elector) retryLog(what string, err error) {
	n, ok := e.retries.Allow(time.Now(), retryLogEvery)
	if !ok {
		return
	}
	e.log.Warn("zk election: "+what+" failed; retrying", "path", e.path, "err", err, "not_logged_since_last", n)
}

// errNoQueue: the queue node (_q) is missing; it is made with the path.
var errNoQueue = errors.New("zk election: the queue node is missing")
