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
//	e, err := zk.New(conn, "/services/scheduler", election.WithTTL(10*time.Second))
//
// or let Dial connect (and own the connection):
//
//	e, err := zk.Dial(ctx, zk.DialConfig{Servers: []string{"127.0.0.1:2181"}}, "/services/scheduler",
//		election.WithID("sched-1"), election.WithTTL(10*time.Second))
//
// # Protocol
//
// Every candidate creates a protected ephemeral-sequential node under the
// election path ("_c_<GUID>-cand-<sequence>", see the layout in nodes.go),
// making the path if it is missing. The node with the lowest sequence
// leads. Each other candidate watches only the node just ahead of it, so a
// handover wakes one candidate, not all (P9). When the node ahead goes, the
// candidate lists the children again; if it now heads the order, a
// transaction with one check operation on its own node confirms, through
// the ensemble's leader, that its session is alive and its node is there
// (P4), and the Term counts from that transaction's send time. When the
// node that went was the head, the check is sent together with the
// listing, so a handover costs one round trip after the watch event.
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
// The token is the leader node's creation zxid. Zxids increase with every
// write of the ensemble, and a later node in the order was created by a
// later write, so tokens increase across leaderships (P2). The sequence
// number would too, but only while the election path lives: it is the
// path's child counter and starts again at 0 when the path is deleted and
// made anew (CURATOR-724), while the zxid never goes back. CheckOp returns
// the check operation for Multi, so that writes commit only while the
// leader's node is there.
//
// # Sessions and the Term's deadline
//
// While leading, a candidate sends a heartbeat — the same check
// transaction — at least every Window/3 through the Term's lease clock
// (the before-renewal hook, the request, Renewed with its send time and
// outcome): the leaders on one connection beat on one tick, and the
// checks of a tick go out as one multi, whose send time each Term counts
// from (a check of the multi that fails — that leader's node changed —
// fails the multi: that leader's Term ends, the others retry 50 ms
// later). It watches its own node, and looks at its connection's state
// whenever it changes: one poller per connection reads it every 10 ms
// for all the leaders on it (an Elector from Dial is also woken by every
// session event). The Term's deadline is the send time of the last confirmed heartbeat +
// TTL/(1+ρ) − margin: the server cannot expire the session before a
// session timeout after it last heard from the client, so with the TTL
// option at most the session timeout the server granted, the Term ends
// before another candidate can be elected (P3). Dial sets the TTL to the
// granted timeout when the server granted less than asked; with New, set
// WithTTL to the session timeout of the connection yourself.
//
// A node found gone, or a new session on the connection, ends the Term at
// once with ErrSessionLost. A lost connection, while the session may still
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
// withdraws, its node is deleted so that the next candidate leads at once;
// a delete that fails is retried in the background until it succeeds,
// since a session, unlike an etcd lease, does not end while its
// connection lives.
//
// # Garbage (P8)
//
// A child whose name does not end in a 10-digit sequence number is
// foreign and ignored. A child in the order that is persistent never goes
// away, so it is skipped and logged. An ephemeral child in the order that
// is not a candidate node of this package (another name, a bad record)
// holds its place and never leads: while it heads the order there is no
// leader, Leader returns a *MalformedNodeError naming it, and Observe
// reports no leader; it goes with its session.
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
// Anyone with the rights to can delete a leader's node or the whole
// election path (zkCli's delete, deleteall), create nodes under it, or
// change its ACL. A leader watches its own node: its deletion ends the
// Term at once with ErrSessionLost (as does a heartbeat that finds the
// node gone or changed), and the next candidate, woken by the same
// deletion, needs one more round trip (its listing and check) before its
// Campaign returns, so the old Term ends first in practice (the tests
// assert that it ends at once, and log the order). It is not a
// guarantee — the server sends the two
// notifications on two connections, and the old leader's process may be
// paused — so a store the leader writes to should fence on the token
// (CheckOp). A waiter whose node vanishes makes a new one and waits on
// (see above). A persistent node named like a candidate's never leads and
// is skipped (see Garbage).
//
// The client's errors are sorted in one place (errors.go): a closed
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
// Priority does not order candidates here: they are served first come,
// first served, and Leader carries Priority as given.
package zk
