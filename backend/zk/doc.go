// Package zk is the Apache ZooKeeper backend of package election: the
// ZooKeeper election recipe with Apache Curator's LeaderLatch bug history
// as its checklist.
//
// # Import name
//
// This package and the ZooKeeper client, github.com/go-zookeeper/zk, are
// both called zk. Import the client under another name:
//
//	import (
//		gozk "github.com/go-zookeeper/zk"
//		"github.com/electkit/election/backend/zk"
//	)
//
//	conn, _, err := gozk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
//	e, err := zk.New(conn, "/services/scheduler", election.WithID("sched-1"))
//
// or let Dial connect (and own the connection):
//
//	e, err := zk.Dial(ctx, zk.DialConfig{Servers: []string{"127.0.0.1:2181"}}, "/services/scheduler",
//		election.WithID("sched-1"))
//
// # TTL and session timeout
//
// The TTL is the session timeout the server granted the connection, which
// servers clamp to their bounds (2–20 ticks by default, 4–40 s at the
// default tickTime of 2 s), so it may differ from the one asked for.
// Leave WithTTL out and the Elector uses the granted timeout; a WithTTL
// that differs from it is refused with an *election.OptionError naming
// both. Dial asks for WithTTL's value (DefaultTTL without it).
//
// The go-zookeeper client shows the granted timeout only in its log and in
// an unexported field of Conn, which this package reads (by name, once the
// connection has a session). New reads it at once when conn has a session;
// otherwise Campaign reads it as soon as its node is made (with a session,
// then) and, if WithTTL differs, withdraws the node and returns the
// OptionError. Every Term reads it again when it begins, so a Term's
// deadline always rests on the timeout of the session it leads on (should
// the connection be lost before any read, the candidate makes a new node
// once reconnected, as when its node vanishes). The client asks for the
// granted timeout again when it reconnects, so the timeout changes only
// when a server with other bounds answers (an ensemble whose members are
// configured differently): a leader that finds its session's timeout
// shorter than its Term's TTL ends its Term with ErrSessionLost, and the
// next Term counts with the new one (with WithTTL set, the next Campaign
// refuses it, as New would). Should a version of the client keep the
// timeout elsewhere, New requires WithTTL and trusts it.
//
// # Dial
//
// Dial waits for a session until ctx ends, or for DialConfig.Wait
// (default DefaultDialWait, 15 s) when ctx has no deadline; its error
// names the servers it tried and the last failure, and wraps ctx's error.
// The client's log goes to the Logger option: attempts that fail at info
// level (each one while Dial waits, then at most one every 5 s), the rest
// at debug level. A Conn of your own logs through the client's default
// logger (the standard log package) unless gozk.WithLogger is given.
//
// # Layout
//
// Under the election path:
//
//	_c_<GUID>-p<prio>-<seq>   one candidate node per candidacy: protected ephemeral-sequential
//	_l                        the leader node: the leader's record, naming its candidate node; ephemeral (persistent when a release handed over)
//	_c_<GUID>-lead            the leadership node: created with _l, ephemeral or persistent as it; its creation zxid is the token
//	_t                        a pending hand-over (Transfer, preemption): ephemeral, names its target's node
//	_r                        a transfer request (RequestTransfer): ephemeral, of the requester's session
//	_w-<GUID>                 a candidate's wake-up name: created and deleted in one multi, never seen
//	_q                        the queue node: persistent, empty, made with the path; a registration of positive priority bumps its version
//
// <prio> is the Priority in 16 hex digits that sort, as text, highest
// priority first (the complement of the value with its sign bit flipped:
// every int64, negative too); <seq> is the sequence ZooKeeper appends.
// Candidates are ordered by priority, highest first, then by sequence
// (first come, first served): every candidate reads the order from the
// names in one listing, with no extra round trip.
//
// # Protocol
//
// Every candidate creates its candidate node, making the path if it is
// missing. A name ordered by priority is chosen before the write, so a
// newcomer of higher priority sorts ahead of candidates already there,
// the leader's among them: the order decides who tries next, never who
// leads. The leader is whoever holds _l. Each waiting candidate watches
// only the candidate node just ahead of it; the first in the order
// watches _l while someone leads (P9). When what it watches goes, it lists
// the children again; at the head of the order with no _l and no pending
// hand-over, it claims: one multi checks its own node (its session is
// alive: P4), asserts that no hand-over is pending (it creates and deletes
// _t), deletes any leadership node left without its _l, and creates _l
// and its leadership node, which only one candidate can (the create of _l
// fails while it exists). The Term counts from that multi's send time,
// and the token is the multi's zxid, read from the leadership node's
// stat.
//
// Next in line — first or second in the order, with a Priority of 0 or
// more — a candidate claims as soon as what it watches is deleted, without
// listing again: one round trip after the watch event, as Curator's
// LeaderLatch needs one (its listing). Its last listing is current
// enough: a newcomer that could sort ahead of it has a positive priority
// and bumps the queue node _q in the multi that creates its node, and the
// claim checks _q at the version read before that listing (a newcomer of
// priority 0 or less sorts behind every waiter that claims early, so an
// election without priorities never bumps _q); any other claim needed _l
// gone, which the first in line watches, or rewrote the claimer's
// candidate node, which the second in line watches; the claim asserts
// that no hand-over is pending and that the leadership nodes it last saw
// are gone. A claim that fails lists again. A claim rewrites the
// claimer's candidate node (its data unchanged), which wakes the one
// candidate behind it; that one reads _q and, if nobody registered since
// its last listing, is next in line without listing again — so a queue of
// 10,000 hands over in about the time of a queue of two. The leader's
// candidate node stays in the order while it leads, so a handover from a
// leader that arrived first wakes the one candidate behind it.
//
// A release hands over to its successor when it can, without a claim
// after it: a leader at the head of the order reads, once it leads, the
// candidate just behind it (an ephemeral candidate node of this layout,
// Priority 0 or more) and the queue node's version, and watches neither
// (a watch would outlive the Term on the server and wake the old leader
// at a later handover; with nobody behind it yet, it watches the children
// until the first registration). Its release is then one multi that
// checks the successor's node is there and _q unchanged (nobody
// registered who could sort between them), deletes its _l, leadership
// node and candidate node, and creates _l (naming the successor's node,
// with its record) and the successor's leadership node — persistent,
// since ephemeral nodes made by the leader's multi would belong to the
// leader's session. The multi's zxid is the token. If the multi no longer
// holds, the nodes go as without it and the next candidate claims.
//
// The successor, woken by its predecessor's deletion (or finding its own
// leadership node in a listing), reads _l and its own candidate node at
// once, both answered by the server it is connected to. A persistent _l
// naming its node and its node there under its session: it leads. Its
// Term counts from the last confirmation of its session through the
// ensemble's leader, which refuses a request of a session it has expired
// (a server cut off from the leader may still answer reads for such a
// session): while a candidate waits second or third in the order, its
// connection syncs through the ensemble's leader at least every third of
// a window, and a leader's heartbeat on the same connection counts too,
// so a confirmation at most half a window old (one in flight is waited
// for) stands in. Without one, a sync goes out with the two reads and
// the Term counts from its send time. A Term counted from an earlier
// confirmation beats at once. That is one round trip to the successor's
// own server after the event, no write: LeaderLatch lists the children
// once after its event.
//
// A persistent _l is valid while the ephemeral candidate node it names
// exists: a successor whose session expires takes its node along, and
// the candidate that watched it, at the head, deletes the stale _l (in
// one multi with its leadership node, so that a leader node made since is
// never deleted in its place) and claims. A leader on a persistent _l
// watches its own candidate node too: another client's delete of it ends
// the Term at once (ErrSessionLost). The head of the order, behind which
// someone leads on a persistent _l, watches the node that _l names. A
// successor that leaves without leading (its Campaign canceled, a whole
// fleet stopped) leaves the persistent _l and its leadership node to the
// next candidate that heads the order, which deletes them. Releases hand
// over only with open node ACLs (every entry of
// Config.NodeACL of the "world" scheme): nodes the leader creates under
// an "auth" or "digest" ACL would be the leader's identity's, and the
// successor could not write its record. A newcomer
// wakes nobody when it queues; one that sorts ahead of a waiter next in
// line costs that waiter a failed claim and a listing at the next
// handover. A waiter finds its place in a listing in one pass, without
// sorting it.
//
// Protected creates: the GUID in the node's name finds a node whose
// create reply was lost (a connection reset mid-request) instead of making
// a second one; Campaign creates again only once a listing has shown no
// node with its GUID. The node's owner is compared with the connection's
// current session before it is used (CURATOR-696: a node left by an
// expired session never leads for the new one).
//
// # Token
//
// The token is the creation zxid of _l and of the leadership node (one
// multi creates both: a claim, or a release's hand-over). Zxids increase
// with every write of the ensemble, and every leadership is a new multi,
// so tokens increase across
// leaderships (P2), also when the election path is deleted and made anew
// (CURATOR-724: the sequence numbers restart, the zxid never goes back).
// Fence returns a check of the leadership node, for Multi, so that
// writes commit only while the leadership is current: the node's name is
// unique to the leadership, and every claim deletes the leadership nodes
// whose _l is gone, so the check fails from the moment anyone else leads.
// _l itself is deleted only in one multi with the leadership node (so
// only by the leadership that made it), or, when that node is gone, after
// a read that finds _l still the leadership's (its creation zxid); a
// persistent _l whose candidate node is gone, by the head of the order.
//
// # Sessions and the Term's deadline
//
// While leading, a candidate sends a heartbeat — a check transaction on
// its leadership node — at least every Window/3 through the Term's lease clock
// (the before-renewal hook, the request, Renewed with its send time and
// outcome): the leaders on one connection beat on one tick, and the
// checks of a tick go out as one multi, whose send time each Term counts
// from (a check of the multi that fails — that leader's node changed —
// fails the multi: that leader's Term ends, the others retry 50 ms
// later). It watches its leadership node and _l, and looks at its connection's state
// whenever it changes: one poller per connection reads it every 10 ms
// for all the leaders on it (an Elector from Dial is also woken by every
// session event). The Term's deadline is the send time of the last confirmed heartbeat +
// TTL/(1+ρ) − margin: the server cannot expire the session before a
// session timeout after it last heard from the client, so with the TTL
// the session timeout the server granted (see TTL and session timeout
// above), the Term ends before another candidate can be elected (P3).
//
// A leadership node or _l found gone, or a new session on the connection,
// ends the Term at once with ErrSessionLost. A lost connection, while the session may still
// live, ends it at once under StepDownOnDisconnect (the default, as
// Curator's standard policy) or holds it until the deadline under
// HoldUntilDeadline (Curator's session policy), where a reconnect in time
// continues the Term. A failed heartbeat is retried; the lease clock ends
// the Term at its deadline if none succeeds. An Elector from New notices a
// disconnect by reading the connection's state, so a blip shorter than
// 10 ms may pass unnoticed; that is harmless, since the session survived.
//
// A candidate whose node vanishes while it waits (its session expired, the
// node or the whole election path was deleted) makes a new node and waits
// on, with a new place in the order. When a Term ends, or a candidate
// withdraws, its nodes are deleted (one multi) so that the next candidate leads at once;
// a delete that fails is retried in the background until it succeeds,
// since a session, unlike an etcd lease, does not end while its
// connection lives.
//
// # Preemption
//
// A leader made WithPreemption(holdOff) holds a child watch on the
// election path (it is woken by every change of the queue, and lists it
// again: the one cost of the option) and reads the priorities from the
// names. Once the best waiting candidate of strictly higher priority has
// been present without a break for holdOff since this leader first saw
// it, the leader reads its record (a malformed one is passed over) and
// hands the leadership to it, as Transfer does, with the Term ending with
// ErrPreempted. Without the option a leader never watches the queue, and
// a candidate of higher priority leads after it, ahead of the others.
//
// # Transfer
//
// Transfer lists the queue and reads the candidate nodes in order (all of
// them for a named target: an operator's call, not a hot path; the first
// well-formed one for ""). With no such candidate it returns
// ErrNoCandidate (and resigns under StepDown). Otherwise it ends the Term
// with ErrTransferred, and then one multi checks that the target's node
// is there, deletes the leader's _l, leadership node and candidate node
// (the candidate leaves the election, as after Resign), creates _t naming
// the target's node, and creates and deletes the target's wake-up name,
// which the target watches besides the node ahead of it, so that it alone
// is woken. While _t is there nobody else can claim (their claims assert
// it is absent); the target's claim deletes it. Transfer returns nil once
// it is gone and _l names the target. The hand-over lapses — Transfer
// deletes _t (if it is still the one it made, by its creation zxid) and
// returns ErrTransferFailed, or ctx's error, or ErrClosed — when the
// target's node goes first, after one lease window, when ctx ends or the
// Elector closes. _t is ephemeral, so a transferring process that dies
// takes it along with its session, and a waiter at the head of the order
// withdraws a _t that no candidate can take (persistent, malformed, or
// naming a node that is gone): a stale marker never wedges the election.
//
// Failure modes: a hand-over to a target that crashed lasts until its
// node goes with its session or the lease window ends, whichever is
// first; until then nobody leads. If the leader's multi's reply is lost,
// Transfer reads _t to learn whether it was made. Two races are known and
// harmless to safety (a token never repeats, one leader at a time): a _t
// withdrawn by a lapse at the instant a new leader, having claimed, makes
// a hand-over of its own would withdraw that one too (the normal order
// then resumes), and a target that read a hand-over could take a later
// one of the same version; each needs a claim and a transfer within one
// round trip.
//
// RequestTransfer, from any Elector of the election (campaigning or not;
// elect transfer), creates the request node _r — ephemeral, of the
// requester's session, naming the leader's token and the target — and
// follows the leader until the target leads. The leader watches _r (one
// watch per leader) and honours a request for its own token as Transfer
// with KeepLeading does; one it cannot honour (no such waiting candidate)
// it answers in _r's data. The requester deletes _r when it returns; one
// request at a time per election.
//
// # Garbage (P8)
//
// A child whose name does not end in a 10-digit sequence number, and is
// none of _l, _t and the leadership nodes, is foreign and ignored. A child
// in the order that is persistent never goes away, so it is skipped and
// logged. An ephemeral child that ends in a sequence number but is not a
// candidate node of this layout (a blocker) sorts ahead of every candidate
// and never leads: while it heads the order there is no leader, Leader
// returns a *MalformedNodeError naming it, and Observe reports no leader;
// it goes with its session. So does a candidate node of this layout
// whose record is malformed, where it sorts. A persistent _l that names
// no candidate node that exists (a hand-over's whose successor is gone,
// or another program's) is deleted by the head of the order; an
// ephemeral malformed _l leads nobody (Leader returns a
// *MalformedNodeError) until it goes. Candidates and Transfer leave malformed nodes out.
//
// # Upgrading from the previous layout
//
// Versions before this layout named candidate nodes
// "_c_<GUID>-cand-<seq>" and let the lowest sequence lead. Both can run
// in one election during a rolling upgrade without two leaders: the old
// code takes this layout's candidate nodes for malformed ones that hold
// their place (they end in a sequence number) and ignores _l, _t and the
// leadership nodes; this layout takes the old nodes for blockers, and
// never claims while one is ephemeral. An old candidate leads only when
// its node has the lowest sequence of all; a new one only when no old
// node exists; a node made later has a higher sequence than a new
// leader's candidate node, which stays while it leads. The order between
// the two kinds is by sequence, not priority, until the old candidates
// are gone.
//
// # Security
//
// Config.PathACL is the election path's ACL when this package creates it,
// and Config.NodeACL the candidate nodes' ACL. ZooKeeper checks a delete
// against the parent's ACL, so the path's ACL decides who may remove a
// leader's node: give the candidates' identities (digest) every permission
// and others at most read. CreatorOnly(gozk.PermRead) on the nodes keeps
// other candidates from changing a leader's record. A client refused by an
// ACL gets an error wrapping gozk.ErrNoAuth that names the path.
//
// # Other clients of the server
//
// Anyone with the rights to can delete a leader's nodes or the whole
// election path (zkCli's delete, deleteall), create nodes under it, or
// change its ACL. A leader watches its leadership node and _l: the
// deletion of either ends the Term at once with ErrSessionLost (as does a
// heartbeat that finds the leadership node gone or changed), and the next
// candidate, woken by the same deletion or the leader's release, needs
// two more round trips (its listing and claim) before its Campaign
// returns, so the old Term ends first in practice (the tests
// assert that it ends at once, and log the order). It is not a
// guarantee — the server sends the two
// notifications on two connections, and the old leader's process may be
// paused — so a store the leader writes to should fence on the token
// (Fence). A waiter whose node vanishes makes a new one and waits on
// (see above). A persistent node named like a candidate's never leads and
// is skipped (see Garbage).
//
// The client's errors are sorted alike everywhere in the package: a closed
// connection (ErrClosing, or ErrConnectionClosed from a Conn closed for
// good) ends Campaign at once with ErrSessionLost; an ACL or authentication
// refusal (ErrNoAuth, ErrAuthFailed, ErrInvalidACL) or a bad path ends it
// with that error wrapped, naming the path; everything else (a connection
// being re-established, a session being replaced) is waited out and logged
// at most once per 5 s, with the number of lines left out.
//
// Campaign and Resign return within 100 ms of their ctx ending whatever
// the server does: a node they leave behind is deleted for up to 40 ms,
// then by the background reaper, which Close waits for (bounded by one
// lease window); the node goes with its session at the latest. Dial
// returns with its ctx too. The lease clocks of ended Terms are dropped as
// soon as their hooks have returned, so an Elector that leads many times
// does not grow.
//
// # Not promised
//
// Priority orders the waiting candidates, not the leadership: without
// preemption a leader leads on whatever queues behind or ahead of it.
// Between candidates that queue at the same moment as a handover, the
// order is the one the claims reach the server in.
package zk
