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
// transaction — every Window/3 through the Term's lease clock (the
// before-renewal hook, the request, Renewed with its send time and
// outcome), watches its own node, and reads its connection's state every
// 10 ms (an Elector from Dial is also woken by every session event). The
// Term's deadline is the send time of the last confirmed heartbeat +
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
// # Not promised
//
// Priority does not order candidates here: they are served first come,
// first served, and Leader carries Priority as given. Deleting a leader's
// node by hand (with the rights to) ends its Term within a round trip,
// through its watch, not before another candidate may lead: that is what
// the token is for.
package zk
