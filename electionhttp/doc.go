// Package electionhttp serves an election's state over HTTP, with the
// standard library's net/http only: health and readiness checks, a JSON
// leader endpoint, and a middleware that sends what only the leader may
// serve to the leader.
//
// A Tracker follows one Elector. It learns this process's own Term from
// election.Run through Tracker.Callbacks (or from SetTerm, for a program
// that calls Campaign itself), and the election's leader from the
// Elector's Observe, which it follows on a goroutine of its own until
// Close. Its handlers:
//
//   - Health: liveness. 503 when this process holds a Term whose deadline
//     is within the slack (WithSlack; default a third of the lease window)
//     or past: renewals are stalled, or the application has not stepped
//     down. Restart such a process. Compare client-go's HealthzAdaptor,
//     which fails only once the lease is overdue by a timeout.
//   - ReadyLeader: readiness of a leader-only service. 200 only while this
//     process holds a valid Term.
//   - ReadyAny: readiness of a service every replica serves. 200 when the
//     election answers Leader (a leader, or no leader) within WithTimeout.
//   - LeaderJSON: who leads, from Elector.Leader: {"leader":true,"self":…,
//     "id":…,"value":…,"token":…,"priority":…}, or {"leader":false}.
//   - Forward: on a follower, proxies (or, WithRedirect, redirects with 307)
//     requests that must go to the leader (WithLeaderOnly; default every
//     method but GET, HEAD and OPTIONS) to the address in the leader's
//     Value (WithLeaderURL), adding HeaderToken and HeaderForwarded; 503
//     with Retry-After when there is no leader; never forwards a request
//     twice.
//
// # What is and is not promised
//
// "Leading" always means a recorded Term that is valid now: its Err is nil
// and its Deadline has not passed, read at each request. A Term past its
// deadline is not leading even if OnDemoted has not run yet, so neither
// ReadyLeader nor Forward acts on a lapsed lease. But an answer is a
// snapshot: a leader that Forward hands a write to may lose its Term while
// serving it, and a proxied request may reach a replica that no longer
// leads (which answers 503, or 421 if the request names a newer
// leadership than its own). As everywhere in package election, pass
// Term.Token (also in HeaderToken) to the resources a leader writes, and
// let them refuse older tokens.
//
// Every constructor validates its arguments: a refused one is an
// *election.OptionError, wrapping election.ErrInvalidOption, that names it.
package electionhttp
