// Package etcd is the election backend on etcd: a candidate holds a key
// under an etcd lease, etcd's Raft majority orders the keys, the oldest live
// key leads, and each waiter watches only the key just ahead of it.
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	...
//	e, err := etcd.New(cli, "/services/scheduler",
//		election.WithID("sched-1"), election.WithValue([]byte("10.0.0.7:8080")),
//		election.WithTTL(5*time.Second))
//	...
//	defer e.Close()
//	t, err := e.Campaign(ctx) // t.Token() is the key's create revision
//
// # Protocol
//
// Campaign grants a new lease of TTL (rounded up to whole seconds; etcd may
// raise it to its own minimum, which only makes the store wait longer than
// the Term counts) and creates the key prefix + lease ID (16 hex digits)
// under it, in a transaction that refuses to overwrite. Then, until the key
// is the oldest: one transaction checks that the key still exists and reads
// the leased key just ahead of it; a watch on that key alone, opened at the
// revision after the read — so it is live at once, never caught up by
// etcd's 100 ms loop for lagging watchers — waits for its deletion. A
// handover therefore wakes one waiter and costs it one read (P9). That
// read, right after the watch reported the deletion, is serializable, and
// counts only if the member that answers had applied the deletion;
// otherwise it is done again, linearizably (see predecessor in etcd.go
// for why this confirms as much as a linearizable read: the Term's lease
// comes from the lease clock, and once no leased key is older, none can
// become older).
//
// When nothing is ahead, Campaign confirms (P4): a keepalive of the lease,
// then a transaction checking that the key exists with its create revision
// and under its lease. The keepalive's send time starts the Term's
// deadline (package election's lease clock: send + TTL/(1+ρ) − margin). A
// candidate whose lease expired while it waited gets ErrSessionLost, never
// a Term.
//
// While the candidacy lasts a goroutine renews the lease every third of the
// lease window with KeepAliveOnce, each renewal timed from its send;
// while leading, each goes through the renewal hooks and the lease clock. A
// failed renewal is retried every 50 ms until the deadline ends the Term
// (ErrLeaseExpired); a lease etcd no longer knows ends it at once
// (ErrSessionLost), as does the client being closed. etcd deletes the key
// no earlier than TTL after it received the last renewal, which is after
// it was sent: so the Term is over before any other candidate can lead
// (P3). A Term that ends for any reason withdraws its candidacy: the key
// is deleted at once.
//
// The token is the key's create revision. Leaders follow key age and every
// new key is younger than every live one, so tokens strictly increase
// across leaderships, across restarts of every candidate (P2).
//
// # Resign, Close and errors
//
// Resign ends the Term before any I/O, stops the renewals and deletes the
// key (guarded by its create revision): the next candidate leads at once.
// The lease, emptied and no longer renewed, is revoked by the next
// Campaign, Resign or Close, or expires on its own after the TTL: etcd
// takes about twice as long to revoke a lease as to delete a key, and a
// revoke in flight slows the next candidate's read, so it is kept off the
// handover's path. Resign is idempotent. If the delete fails, Resign
// returns the error and keeps the candidacy pending: the next Resign or
// Close tries again, and meanwhile nothing renews the lease, so it
// expires after the TTL and takes the key with it. Campaign's error paths
// release what they created. Close releases everything (keys and leases)
// with a timeout of one lease window, stops every goroutine and leaves
// the client open: it is the caller's.
//
// # Garbage under the prefix
//
// Every key under the prefix is checked when read: its name must be the
// prefix plus the 16-hex-digit ID of its own lease, and its value a
// version-1 record (ID, priority, value) with a valid ID. A key without a
// lease can never expire, so waiting for it would block the election for
// good: it is skipped (logged) and never leads. A leased key that fails the
// check keeps its place in the queue — it may be the candidate of another
// program — but never leads: while it is the oldest, Leader returns a
// *MalformedKeyError (errors.Is ErrMalformedKey and election.ErrNoLeader)
// naming the key and what is wrong with it, Observe reports no leader and
// logs it, and no candidate behind it leads until it is deleted or its lease
// expires. Two leased keys that share the oldest create revision (written
// by one transaction, which Campaign never does) fail the same way: a
// token names one leadership only.
//
// # Other clients of the store
//
// etcd lets any client with access to the prefix delete a key (etcdctl
// del), delete the whole prefix, revoke a lease, or put a key again
// without its lease. So a candidacy does not trust its lease alone: from
// the revision after its key was created, it watches that key (a watch on
// the one key, then a read that confirms the key is still its own). A
// DELETE of the key — by another client, with the prefix, by a revoked or
// expired lease — or a PUT that makes it another's (no lease or another
// lease, another create revision, another candidate's record) ends the
// candidacy at once: a leader's Term ends with ErrSessionLost (measured in
// BENCHMARKS.md, "A leader notices another client": about a millisecond),
// a waiter's Campaign returns ErrSessionLost, and what is left of it is
// released. The rule fails closed: a renewal extends the Term only if the
// watch was live both when it was sent and when it was answered, so a
// leader whose watch broke (a member restart, a lost stream) keeps its
// Term only to its current deadline unless the watch is back, and then it
// reads its key again before trusting it.
//
// What is promised when someone else deletes the leader's key: the leader
// and the next candidate learn of it from the same revision; the next
// candidate then needs one more round trip (its confirmation) before its
// Campaign returns, so the old Term ends first in practice (the tests
// assert that it ends at once, long before its lease would tell, and log
// the order). It is not a guarantee: etcd delivers one event to two watch
// streams in no fixed order, and the old leader's process may be paused
// or slow. The token covers the rest: a store the leader writes to should
// fence on it (LeaderCmp, or comparing tokens), as it must for a paused
// process anyway.
//
// A waiter wakes when the key ahead of it is deleted or put again without
// its lease; keys without a lease are skipped (see Garbage below), so a
// leader that dies after someone re-put its key unleased does not block
// the election.
//
// Election names do not nest into each other: a candidate's key is the
// prefix plus 16 hex digits, and every read of the queue skips keys
// further down (those of an election named prefix + "/a", say), so "/svc"
// and "/svc/a" are two independent elections that never block each other.
//
// A key can only lead with a token above every token this Elector has
// seen lead: a leased key whose create revision is below one already seen
// (an old key that another client attached a lease to) never leads; Leader
// returns a *MalformedKeyError saying so, and candidates behind it wait,
// as for any malformed key. A token never runs backwards.
//
// Errors of the store are sorted in one place (errors.go): a closed client,
// a permission or authentication error (etcd's "permission denied", "user
// name is empty", an invalid auth token; gRPC PermissionDenied,
// Unauthenticated, InvalidArgument) is final — Campaign returns it wrapped
// with ErrSessionLost and the election's name, and a leader's Term ends
// with it — and everything else (a lost connection, a member without a Raft
// leader, a timeout) is retried with backoff and logged at most once per
// 5 s per candidacy, with the number of lines left out, so a retry is never
// silent.
//
// Campaign and Resign return within 100 ms of their ctx ending whatever
// the store does: what they leave to release (a key, a lease) is tried for
// 40 ms, then released in the background, for at most one lease window;
// Close waits for those releases. Leases are drawn with IDs the client
// chooses, so a grant whose reply was lost is revoked, not left to expire.
//
// # Observe
//
// An Elector's Observe streams share one watch on the prefix. It first
// reads the prefix, then applies the watch's events from the revision after
// that read. When the watch breaks — compaction, a lost connection, a member
// without a Raft leader — it reads again and resumes, so it never skips the
// newest value, and it reports "no leader" (a zero Leader) when the prefix
// holds no leased key.
//
// # Fencing
//
// LeaderCmp gives a clientv3.Cmp that holds exactly while the Term's key
// exists: in the If of a transaction it makes the writes happen only while
// the Term is current. Proclaim changes the Value observers see, guarded
// the same way.
//
// # Priority
//
// Candidates are served first come, first served: Priority is carried in
// Leader but does not order candidates on this backend.
package etcd
