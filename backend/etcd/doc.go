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
