package etcd

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/lograte"
)

// This file is the one place that decides which errors of etcd end a
// candidacy and which are waited out.
//
// Final: the store refuses this client for good, or this client is gone —
// permission denied (a role revoked), failed or missing authentication (a
// stale token is not: the next request logs in again), a
// request etcd will never accept (too large, too many operations), the
// client closed. Retrying them would spin silently while the lease runs
// out, so Campaign returns them (wrapped, with the election's name) and a
// candidacy that meets one in its renewals or its guard ends with
// ErrSessionLost carrying the cause.
//
// Retried: everything else — no Raft leader, timeouts, too many requests,
// an unreachable member, a leader change. Each is logged, at most once per
// retryLogEvery per candidacy with a count of those not logged, so a
// retry is never silent and never floods the log.

// finalErrors are the etcd errors no retry can cure.
var finalErrors = []error{
	rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed, rpctypes.ErrAuthNotEnabled,
	rpctypes.ErrInvalidAuthMgmt, rpctypes.ErrUserEmpty,
	rpctypes.ErrUserNotFound, rpctypes.ErrRoleNotFound,
	rpctypes.ErrRequestTooLarge, rpctypes.ErrTooManyOps, rpctypes.ErrGRPCNotCapable,
}

// staleToken reports whether err says the request's auth token is not (or
// not yet, or no longer) known to the member that served it. It is
// retried, never final: clientv3 logs in again for the next request (for
// every stream it opens, such as a watch, and for a unary request that met
// it), and a member that had not applied a new login yet soon has. A password that
// no longer logs in fails the login itself, with ErrAuthFailed: final.
func staleToken(err error) bool {
	return errors.Is(err, rpctypes.ErrInvalidAuthToken) || errors.Is(err, rpctypes.ErrAuthOldRevision)
}

// isFinal reports whether err, from a request of e's client, will not go
// away by retrying.
func (e *Elector) isFinal(err error) bool { return isFinal(e.cli, err) }

// isFinal reports whether err, from a request of cli, will not go away by
// retrying.
func isFinal(cli *clientv3.Client, err error) bool {
	if cli.Ctx().Err() != nil {
		return true // the client was closed
	}
	if err == nil {
		return false
	}
	for _, f := range finalErrors {
		if errors.Is(err, f) {
			return true
		}
	}
	if staleToken(err) {
		return false
	}
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
		return true
	}
	return false
}

// finalErr wraps a final error for a candidacy that must end: with
// ErrSessionLost, and ErrClosed's words when the client is gone.
func (e *Elector) finalErr(what string, err error) error {
	if e.cli.Ctx().Err() != nil {
		return fmt.Errorf("%w: %s: the etcd client was closed", election.ErrSessionLost, what)
	}
	return fmt.Errorf("%w: etcd election %s: %s: %w", election.ErrSessionLost, e.Name(), what, err)
}

// sessionErr wraps a final error of a session's request: with
// ErrSessionLost, and ErrClosed's words when the client is gone.
func sessionErr(cli *clientv3.Client, what string, err error) error {
	if cli.Ctx().Err() != nil {
		return fmt.Errorf("%w: %s: the etcd client was closed", election.ErrSessionLost, what)
	}
	return fmt.Errorf("%w: etcd election: %s: %w", election.ErrSessionLost, what, err)
}

// retryLogEvery bounds how often one candidacy logs a retried error.
const retryLogEvery = 5 * time.Second

// retryLog logs that what failed with err and will be retried, unless a
// line was logged for c less than retryLogEvery ago (then it is counted,
// and the count goes with the next line).
func (e *Elector) retryLog(c *candidacy, what string, err error) {
	var p *atomic.Pointer[lograte.Limiter]
	if c != nil {
		p = &c.retries
	} else {
		p = &e.extra().retries
	}
	l := p.Load()
	if l == nil {
		p.CompareAndSwap(nil, new(lograte.Limiter))
		l = p.Load()
	}
	n, ok := l.Allow(time.Now(), retryLogEvery)
	if !ok {
		return
	}
	key := ""
	if c != nil {
		key = c.key
	}
	e.o.Logger.Warn("etcd election: "+what+" failed; retrying", "name", e.Name(), "key", key, "err", err, "not_logged_since_last", n)
}
