// Package kube is the election backend on Kubernetes: one
// coordination.k8s.io/v1 Lease per election, the very object client-go's
// resourcelock.LeaseLock reads and writes, so that `kubectl get lease`
// shows the holder and candidates of client-go's leaderelection and of
// this package can share one Lease without ever both leading.
//
//	cs := kubernetes.NewForConfigOrDie(cfg)
//	e, err := kube.New(cs.CoordinationV1(), "my-namespace", "my-service", election.WithID(podName))
//
// # The Lease
//
// The spec is client-go's leader election record: holderIdentity (the
// candidate's ID), leaseDurationSeconds (the TTL, so a whole number of
// seconds), acquireTime, renewTime and leaseTransitions (one more at each
// change of holder, as client-go counts). This backend adds one
// annotation, election.electkit.io/term (Annotation), with the
// leadership's token, priority and value; it counts only while its holder
// and acquire time are the spec's, since client-go keeps the annotations
// it read when it takes the Lease over.
//
// Every write is an update conditional on the resourceVersion read
// (optimistic concurrency), as client-go's are. The Lease is free when its
// holderIdentity is empty (released) or when its holder's lease has lapsed
// on the candidate's own clock: leaseDurationSeconds after the candidate
// last saw the record change, the rule client-go's candidates keep with
// their observedTime. The Lease does not exist yet: the first candidate
// creates it held by nobody, then takes it like any other time.
//
// # Priority, preemption, transfer
//
// A waiting candidate registers in a candidate record: a Lease of its own
// named after the election's and its ID (name-c-<hash>), labelled
// CandidateLabel, holding its ID, priority, value and the resourceVersion
// it was created at (CandidateAnnotation), renewed every third of the
// lease window and deleted when the candidacy ends (one left behind by a
// crash lapses after its leaseDurationSeconds). Of the candidates that find
// the Lease free, the head of the live records takes it: the highest
// Priority, then the earliest registered (Candidates lists them in that
// order); a Lease left free for a whole TTL goes to whoever takes it
// first. Every release names the candidate it hands the Lease to in the
// HandOverAnnotation, which that candidate takes at once while our others
// leave it alone for a lease window: Resign, Close and a Term that ended
// by itself name the head of the records; Transfer its target; a leader
// made WithPreemption, the best waiting candidate of higher priority once
// it has waited the hold-off. A record that another client deletes is
// registered anew at its waiter's next renewal.
// (spec.preferredHolder would say the same, but the API server keeps it
// only with the CoordinatedLeaderElection feature on.) client-go's
// candidates know none of this: in a mixed election the order and
// hand-overs hold among ours, and client-go's may take a free Lease first.
// RequestTransfer, from any Elector of the election (campaigning or not),
// writes a request on the Lease (RequestAnnotation, naming the leadership
// by its token); the leader honours it as Transfer with KeepLeading does.
//
// The candidates need get, list, watch, create, update and delete on
// coordination.k8s.io leases in the namespace.
//
// # Tokens (P2)
//
// A Term's token is the resourceVersion of the Lease that the winning
// update was conditional on, plus one. The API server's resourceVersion is
// etcd's revision: it rises with every write of any object, so each
// taking of the Lease reads a larger one than the last taking wrote, and
// tokens strictly increase across leaderships, across deletes and
// re-creations of the Lease and restarts of every candidate. A
// resourceVersion that is not a decimal number (Kubernetes calls it
// opaque; no API server in use makes another) is refused: such a Lease is
// never written, and Campaign waits and logs. What `kubectl edit` can do:
// it cannot set resourceVersion; an edited annotation does not change any
// Term's token (the leader keeps its own), and a holder whose annotation
// does not match is reported with Token 0. A leadership won by client-go
// has no token of ours: Leader and Observe report its holderIdentity with
// Token 0, and a resource fenced with our tokens accepts nothing from it.
//
// # Deadlines (P3)
//
// A Term ends at the send time of its last successful renewal plus
// TTL/(1+ρ) − margin on this process's monotonic clock (backend.LeaseClock).
// Any other candidate saw that renewal no earlier than it was sent, and
// waits leaseDurationSeconds (the TTL) on its own clock from then: the
// Term ends first as long as the clocks' rates differ by less than ρ. The
// leader renews every third of its lease window, each renewal conditional
// on the version it last wrote; a renewal refused as forbidden (its RBAC
// taken away) ends the Term at once.
//
// The leader also watches the Lease: another client's delete, another
// holderIdentity (an empty one too: `kubectl edit` can release it), an
// annotation that no longer names the Term, or a leaseDurationSeconds cut
// below the TTL (others may take over sooner) ends the Term at once with an
// error wrapping election.ErrSessionLost that names the Lease. A leader cut
// off from the API server cannot see such a change: the token is what
// fences it. An edit of renewTime, labels or other annotations leaves the
// Term valid; the next renewal is conditional on the edited version.
//
// # Side by side with client-go
//
// Both kinds keep the same rules, so they never both lead on one Lease,
// with three caveats that are client-go's: a client-go leader with
// ReleaseOnCancel that is cut off from the API server tells its work to
// stop only after its release attempt times out (RenewDeadline), which can
// be after the lease lapsed; a client-go candidate whose identity equals
// the holder's treats the Lease as its own (give every candidate its own
// ID; ours waits out a holder with its own ID like any other); and
// client-go's candidates take a deleted Lease at once. Resign releases the
// Lease as ReleaseOnCancel does (holderIdentity empty,
// leaseDurationSeconds 1), so a client-go candidate takes it on its next
// retry, and ours on the watch event. A client-go leader's release reads
// the Lease and updates it without checking who holds it: one whose lease
// lapsed while it was cut off can clear our newer leadership, whose Term
// then ends on the watch event.
//
// # Cost
//
// A waiting candidate holds one watch of the Lease (field selector
// metadata.name) and renews its record every third of the lease window:
// at the default TTL (10 s) one request per 3.3 s; client-go's send one
// GET per RetryPeriod (2 s, jittered up to 4.4 s). Every renewal of the
// leader is one watch event to each waiter and each Observe (served from
// the API server's watch cache): every candidate that may take the Lease
// must have seen its last change, and may take a held Lease only a full
// leaseDurationSeconds after that, as client-go's do — a waiter that
// watched only the candidate ahead of it would, on becoming head, wait a
// whole lease duration from then before it could take a lapsed Lease. A release by
// Resign, Close, Transfer or preemption names its successor (the leader
// lists the candidate records once): the successor takes the Lease on the
// watch event and the other waiters send nothing, though each still gets
// the event. A Lease that lapses (its leader crashed) names nobody: every
// waiter lists the records once, and only the head writes. Electors that
// share a clientset share its rate limiter (client-go's default: 5
// requests per second): give it room.
//
// Names: an election's name here is the Lease's name in a namespace (DNS
// rules), not the slash-separated path of backend.ValidateName.
package kube
