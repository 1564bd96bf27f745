// Package backend holds what a backend of package election is built
// from: the Term's constructor and its lease clock, the checks of IDs and
// election names, and the optional interfaces. An application does not
// need it; it is for whoever writes a backend on a store of their own.
// backend/etcd, backend/zk and backend/inmem are built on it, and a backend
// outside this module is built on it the same way.
//
// # What a backend does
//
// A backend implements election.Elector, keeping the contract documented on
// it and on package election (P1–P9). In practice:
//
//   - Terms. Build each Term with NewTerm, from the send time of the request
//     that confirmed the candidate's lease (a time.Now reading taken before
//     the request left), and drive it through the returned LeaseClock: for
//     each renewal while leading, BeforeRenew, then the request, then
//     Renewed with the send time and the outcome; End as soon as the
//     leadership is over (resigned, session lost, preempted, transferred,
//     closed); Wait before Close returns. The lease clock alone decides the
//     deadline, runs the renewal hooks and reports to the Elector's
//     election.Events: a backend never computes a deadline of its own.
//   - Errors. Wrap election's sentinel errors with %w and context (the
//     endpoint, the key, the name), so that callers test them with
//     errors.Is; return a canceled or expired ctx as ctx.Err(), unwrapped.
//     Refuse a bad argument with an *election.OptionError (wrapping
//     election.ErrInvalidOption) that names it, formatted by QuoteValue;
//     never panic on one.
//   - Names and IDs. Check the election's name with ValidateName, so that
//     the same names are accepted and refused on every backend, and check
//     every candidate ID read back from the store with ValidateID, so that
//     a foreign or damaged record never becomes a leader.
//   - Resign. Send the store's request under ResignContext(ctx, bound):
//     the Term has ended before the request goes, and with it everything
//     derived from the Term's context, which must not cancel the request
//     that hands the leadership on.
//   - Options. Give the Elector a method Options() election.Options
//     returning the options it was made with, so that election.Run reports
//     its campaigns to the same election.Events as the Terms.
//   - Optionally, Lister (for election.Candidates), Transferer (for
//     election.Transfer) and TransferRequester (for
//     election.RequestTransfer). Before it hands a leadership on, a
//     Transferer ends the Term and waits for its hooks with
//     LeaseClock.AwaitHooks(HandOverWait).
//
// # Proving it
//
// Run the conformance suite, electiontest.Run, from the backend's tests:
// it checks P1–P7, priority, preemption and transfer against the
// backend's real store, and is the contract in code. The suite itself is
// proven on a reference backend, each of whose deliberate bugs makes a
// subtest fail. P8
// (garbage in the store fails closed) and P9 (no herd) depend on the
// store's layout: test them beside the suite.
package backend
