// Package election elects one primary among the replicas of a service, in
// the tradition of Google's Chubby and Apache ZooKeeper.
//
// An Elector is one candidate of one election. Its backend decides where
// leadership comes from: backend/etcd (a key under a lease, ordered by etcd's
// Raft majority), backend/zk (an ephemeral-sequential znode) or backend/inmem
// (the classic algorithms of package classic, run between goroutines). This
// package imports none of them; it holds the contract they all keep, the
// Term they all hand out, and Run.
//
// # Lifecycle
//
// Campaign blocks until the candidate leads and returns a Term: one
// leadership, with a fencing token and a deadline. The Term stays valid
// until Done is closed; Err then says why it ended (ErrResigned,
// ErrLeaseExpired, ErrSessionLost, ErrPreempted, ErrTransferred,
// ErrUnhealthy, ErrClosed).
// Resign hands leadership to the next candidate at once; Close resigns,
// withdraws and releases everything. Leader and Observe tell any candidate
// who leads now.
//
// Most programs use Run, which campaigns, calls OnElected with a context
// that ends with the Term, calls OnDemoted when the Term ends, and
// campaigns again, until its ctx ends; then it stops OnElected before it
// hands over:
//
//	err := election.Run(ctx, e, election.Callbacks{
//		OnElected: func(ctx context.Context, t *election.Term) {
//			serveAsPrimary(ctx, t.Token()) // return once ctx is done
//		},
//		OnDemoted: func(t *election.Term) { log.Print("demoted: ", t.Err()) },
//	})
//
// To step down from inside OnElected, call e.Resign(ctx) with OnElected's
// ctx (see Run).
//
// # Guarantees
//
// Every backend keeps these. The conformance suite in package electiontest
// checks P1–P7 on any backend; P8 and P9 depend on the store's layout, so
// each backend's own tests check them.
//
//   - P1 one leader per token: at most one candidate ever gets a Term with a
//     given token.
//   - P2 monotonic fencing: tokens strictly increase across successive
//     leaderships of one election, across restarts of every candidate.
//   - P3 step down before the lease can lapse: Done closes no later than the
//     last successful renewal's send time + TTL/(1+Drift) − Margin on the
//     monotonic clock, so no other candidate can have been elected while a
//     Term is valid. Term.Err reads the clock, so it is exact even when the
//     deadline timer has not run yet. No deadline or term decision reads the
//     wall clock: a step of the machine's clock (NTP, an operator, a VM
//     restored from a snapshot) neither ends a Term early nor extends one;
//     each backend's tests step the wall clock by hours while leading to
//     show it. Deadline carries a monotonic reading: compare it with
//     time.Now (Before, Until), not through its wall reading (Unix,
//     formatting), which a step makes wrong.
//   - P4 no phantom leadership: before Campaign returns, the candidate's own
//     key or node is confirmed to exist under its own live lease or session.
//   - P5 no lost or overlapping callbacks: under Run, exactly one OnElected
//     and one OnDemoted per Term, in token order, never overlapping, on every
//     exit path (expiry, Resign, ctx, backend error, panic in user code).
//   - P6 bounded failover: after Resign the next candidate leads within about
//     one store round trip; after a crash within TTL + one renewal interval +
//     the store's own expiry delay.
//   - P7 renewal never fails silently: each renewal outcome reaches the
//     after-renewal hook; a lost session ends the Term; campaigning again
//     uses a new session and gets a new token.
//   - P8 garbage fails closed: foreign or malformed keys or znodes under the
//     election's prefix never produce a leader; they are reported, and never
//     crash the candidate.
//   - P9 no herd: a leader change wakes O(1) waiting candidates.
//
// # Priority, preemption and transfer
//
// Among waiting candidates the highest Priority (WithPriority) leads next,
// ties first come, first served; every backend keeps that order in its
// store, so candidates agree on it without asking each other. A candidate
// of higher priority than the leader waits for the leader to go, unless the
// leader was made WithPreemption(holdOff): then it steps down (ErrPreempted)
// for one that has waited holdOff, and that one leads next. Transfer hands
// a Term on to a named waiting candidate, or to the best one, at once —
// before a node is drained, say — and RequestTransfer asks the leader for
// that from any process (elect transfer); Candidates lists who waits. A
// leadership handed on is over before the next one begins (P3), and the
// next token is higher (P2). Each backend documents its costs and bounds.
//
// # What is not promised: use the token
//
// No library can promise that only one process believes it leads at every
// instant. A process can be paused (a GC pause, a stopped VM, SIGSTOP)
// between checking its Term and acting on it, and act after the Term ended
// and another candidate was elected. The deadline and margin make this
// unlikely; the fencing token makes it harmless. Pass Term.Token to every
// resource the leader writes, and let the resource refuse tokens older than
// the newest it has seen:
//
//	// In the leader:
//	_, err := db.ExecContext(ctx,
//		`UPDATE jobs SET owner = $1, fence = $2 WHERE id = $3 AND fence <= $2`,
//		myID, t.Token(), jobID)
//
//	// Or in a service of your own:
//	func (s *Store) Write(token uint64, v []byte) error {
//		s.mu.Lock()
//		defer s.mu.Unlock()
//		if token < s.highest {
//			return fmt.Errorf("stale leader: token %d < %d", token, s.highest)
//		}
//		s.highest, s.value = token, v
//		return nil
//	}
//
// # Options
//
// NewOptions resolves the With… options into Options and validates them; a
// refused value is an *OptionError wrapping ErrInvalidOption that names the
// field and the value. Nothing falls back to a default silently. The
// defaults and bounds are the constants DefaultTTL, MinTTL, MaxTTL,
// DefaultDrift, MaxDrift, DefaultMargin, MaxIDLen, MaxValueSize and IDChars.
//
// # Names
//
// An election's name follows one rule on every backend: an absolute
// slash-separated path such as "/services/scheduler" (on etcd the prefix of
// the election's keys, on ZooKeeper its node's path), of segments made of
// ASCII letters, digits, '.', '_' and '-', at most 256 bytes long. A name
// is never cleaned or completed: a constructor refuses, with an
// *OptionError for "name" that says why, a relative name ("services/demo":
// the error suggests "/services/demo"), a trailing "/" or a doubled one
// (an empty segment), a "." or ".." segment, and a reserved segment: one
// that begins with "_" (the backends' own keys and nodes live under the
// name) or a first segment "zookeeper" (ZooKeeper's own). Package backend's
// ValidateName is the rule, for backend authors.
//
// # Renewal hooks
//
// WithBeforeRenew runs before each lease renewal while leading; an error
// makes the leader step down with ErrUnhealthy (a health check that fails
// should not keep leadership). WithAfterRenew receives every renewal
// outcome with its latency and the new deadline. See Term for how hooks
// that block or panic are handled: neither can keep a Term alive past its
// deadline. WithEvents receives every Term's start, renewals and end and,
// under Run, every campaign and leader change: what a metrics exporter
// needs (the module github.com/electkit/election/metrics is one).
//
// # Writing a backend
//
// Package github.com/electkit/election/backend holds what a backend is
// built from (the Term's constructor and lease clock, the checks of names
// and IDs, the optional interfaces) and says what a backend must do; the
// conformance suite, package electiontest, checks that it does.
package election
