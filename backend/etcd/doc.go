// Package etcd is the election backend on etcd: candidates queue under
// their leases in key order, read in windows whose cost does not grow with
// the queue, the head of the queue creates a leadership key (or the
// leader's release creates it for the candidate just below the leader,
// which leads on that event with no request), and each waiter watches
// only the candidate just ahead of it.
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	...
//	e, err := etcd.New(cli, "/services/scheduler",
//		election.WithID("sched-1"), election.WithValue([]byte("10.0.0.7:8080")),
//		election.WithTTL(5*time.Second))
//	...
//	defer e.Close()
//	t, err := e.Campaign(ctx) // t.Token() is its leadership key's create revision
//
// An Elector talks to etcd on the client's gRPC connection, through the
// client's interceptors (retries, authentication) and with its call
// options, but not through the client's KV, Watcher and Lease. A client
// whose KV or Watcher is not clientv3's own is refused — a namespace set
// with namespace.NewKV and NewWatcher, above all, but any wrapper
// (ordering, a leasing or a logging KV), which would apply to some of an
// Elector's requests only — as is a client without a connection
// (clientv3.NewCtxClient, the embedded server's v3client). A namespace
// belongs in the election's name; what a wrapper does for the rest of a
// program goes in gRPC interceptors (clientv3.Config.DialOptions), which
// an Elector's requests pass through, or on a client of its own.
// Its requests are built as etcd's messages: since etcd v3.7, clientv3's
// builders clone every comparison by reflection at each step.
//
// # Keys
//
// Under the election's name N (values are JSON records naming the candidate):
//
//	N/_l/<revision>-<lease>-<nonce>           the leadership key: the leader's (and a reservation of earlier versions)
//	N/_r                                      a transfer request (RequestTransfer), while one is pending
//	N/_t                                      a pending hand-over of earlier versions (still honoured)
//	N/_c/<priority><arrival>-<lease>-<nonce>  one queue key per candidate, under its lease
//	N/_c/<…>-<lease>-<nonce>/h                the hand-over mark of a candidate a hand-over made leader, under its lease
//
// Queue keys sort so that the candidate ahead sorts after: higher
// Priority first, then earlier arrival (the store's revision read just
// before the key was written, with whether a leader key exists; with a
// candidacy's own lease the read runs beside the lease's grant). "The
// candidate just ahead" is the smallest key
// above one's own, and "anyone ahead" that read coming back empty. etcd
// v3.6 answers a range by visiting every key of it in its index, even
// with a limit (to count them), and a range Compare by reading every key
// of it with its value; any sort order but key-ascending, or a revision
// filter, also fetches every value. So the queue is read in windows above
// one's key — 16 ranks (arrivals), then 16 times wider each up to the
// first that reaches past the earliest arrival possible (4,096 times
// where only priorities differ), the last up to the queue's end — each
// in a nested transaction that reads the next window only if this one is
// empty: a read costs the keys of the
// first non-empty window and an index lookup per empty one. A
// registration reads the first window in its create, or the second if
// the first is empty (arrivals up to 256 revisions earlier: those of a
// burst of elections started at once spread that far), and reads on
// only if both are empty;
// the claim of the leader key checks the windows the
// same way. So the store's work for a registration, a handover or a
// Leader call does not grow with the queue (BENCHMARKS.md, "Scale").
//
// Segments of election names that begin with "_" are reserved for these
// keys: New refuses them, so that no election's keys fall among another's.
// "/svc" and "/svc/a" are independent elections.
//
// # Protocol
//
// Campaign takes a lease (a new one per candidacy, or the shared
// Session's) and, in one transaction, creates its queue key (refusing to
// overwrite) and reads the first window above it (the second, if that is
// empty) and the leader key; in
// an election with no leader key and nothing queued above, the same
// transaction also creates the leader key (the claim below, folded into
// the create while the lease's last renewal is fresh, and only if the
// arrival read found no leader key; it checks the first window and then
// the rest of the queue in one Compare, where the queue above is short,
// since every such create carries it into etcd's log, which etcd keeps in
// memory), so the first candidate of an empty election leads in one
// write. A create stands only if no leadership key is named for an
// arrival at or after its own that would sort behind it: no candidate
// queued later sorts ahead of a leader's queue key. A refused create
// arrives again at the revision its refusal came with, which is after
// that leadership key's, and is sent again with no read in between
// (the arrival is read only when an earlier try's reply was lost).
// Otherwise
// the candidacy waits — parked, with no goroutine of its own: its watch is
// an entry on the client's one shared watch stream, and a response, its
// end or a poll runs it again — as follows:
//
//   - with candidates ahead, it watches the range from its own key to the
//     key just ahead of it — or, when that key heads the queue, to the
//     leader key. A candidate queued in between (the same arrival, or a
//     higher priority) does not wake it to read the queue: its watch
//     narrows to the new key ahead;
//   - the leader follows the candidate just below it, its successor: it
//     reads it once it leads (windows below its key, two at a time, in a
//     read; a leader from its create, in an election it found empty,
//     learns of its successor from its watch alone), and its watch, which
//     runs from the queue's beginning while it leads, shows a newcomer
//     between them and the successor's going (then it reads again);
//   - the leader's release hands over to its successor: in the
//     transaction that deletes the leader's keys it creates the
//     successor's leadership key (named for the successor's arrival,
//     under the successor's lease, with its record) and puts the
//     successor's hand-over mark — its queue key's name plus "/h", under
//     its lease, with its record naming that key and saying that the
//     successor heads the queue — if the successor's key is still the one
//     read under its lease (P4), nothing is queued between them or above
//     the leader's key, and the leader's leadership key exists with nothing
//     after it. A leader that headed the queue when its Term began (a
//     claim, or a hand-over whose mark said so) compares the queue above
//     it from the next priority up: while its leadership key exists, a
//     create refuses a key of its priority above it. A leader a Transfer
//     or a preemption made compares the whole queue above it. The
//     release's Compares stay off the keys past handovers deleted, which
//     etcd keeps in its index until a compaction. The mark sorts just after the successor's queue key and
//     before the leader's: inside the successor's watch, whatever its
//     end, and outside that of the candidate behind, which ends just past
//     the successor's queue key and sees nothing of the hand-over. The
//     successor sees the mark's put (and, at the head watching up to the
//     leadership keys, the leader's key going and its own coming, in the
//     same revision) and leads with no request after the event; its token
//     is that key's create revision. A successor that saw only its mark
//     reads its leadership key once its Term has begun, as after a
//     Transfer (a mark another client forged ends that Term at once); the
//     head, which watches the leadership keys, ignores a mark without
//     them. The mark goes with its candidate's queue key (its release
//     deletes both, and they share a lease); reads of the queue above a
//     candidate begin past its mark and pass over the mark of a key they
//     hold;
//   - at the head with no leader (the leader crashed, or released without
//     a successor it could hand over to), it creates its leadership key,
//     in a transaction that succeeds only if no leadership key exists, its
//     own queue key still exists under its lease (P4), and nothing is
//     queued above it. The key's create revision is the token.
//
// Each watch starts at the revision after the read it follows from, and is
// kept while its range stays the same. A handover — the leader's release
// hands over in the transaction that deletes its leadership key and its
// queue key — wakes the one candidate it hands over to, which leads on
// the event with no request, and sends, once it leads, a read of its own
// successor; the others sleep on (P9). A leader's crash (its lease expires
// and takes both keys), or a release that could not hand over, wakes the
// one candidate whose range holds those keys, which creates its
// leadership key at once. A newcomer wakes at most the candidate it sorts
// in front of, and the leader's watch.
//
// The Term's deadline counts from the send time of the last renewal etcd
// confirmed of the lease (package election's lease clock: send + TTL/(1+ρ)
// − margin); if that is more than half a lease window old when the
// candidate would lead, a renewal is sent first. A candidate whose lease
// expired while it waited gets ErrSessionLost, never a Term.
//
// While a candidacy lasts its lease is renewed every third of the lease
// window, each renewal a keepalive request timed from its own send, on one
// LeaseKeepAlive stream per client shared by all its leases (etcd answers
// a stream's requests in order, so each reply is matched to its request;
// a renewal without a reply in time breaks the stream, and the next one
// opens another, perhaps to another member); while
// leading, each goes through the renewal hooks and the lease clock. A
// failed renewal is retried after a pause that grows from 50 ms to a
// quarter of the renewal interval, with jitter, until the deadline ends the Term
// (ErrLeaseExpired); a lease etcd no longer knows ends it at once
// (ErrSessionLost), as does the client being closed. etcd deletes the
// keys no earlier than TTL after it received the last renewal, which is
// after it was sent: so the Term is over before any other candidate can
// lead (P3). A Term that ends for any reason withdraws its candidacy: its
// keys are deleted at once.
//
// Tokens are create revisions of leadership keys, one created anew for
// every leadership, a hand-over's in the release that ends the leader's
// (so after the leader's Term began): they strictly increase across
// leaderships and restarts of every candidate (P2). A successor's Term
// counts from its lease's last confirmed renewal, as any other's (renewed
// first if that is stale), from the moment it learns it leads.
//
// # Sessions
//
// NewSession makes one lease with one renewal loop that any number of
// Electors of any elections share (NewWithSession): a process with a
// leader per shard renews one lease, about one request per third of a
// lease window, instead of one per election. At each renewal tick the
// Session sends one keepalive, and every Term on it without a
// before-renewal hook counts from that one, however many there are, and
// is renewed by the goroutine that guards its keys: a leader holds one
// goroutine. The Term of an Elector with a hook is renewed by a second
// goroutine, which waits for the hook, and counts from a keepalive sent
// after the hook returned (the tick's, if not yet sent a few milliseconds
// on, or one more); a slow hook delays only its own Term's renewal and a
// failing one ends only its own Term. Every Term's deadline counts from
// the Session's renewals. The trade-off: a
// lost Session (its lease expired or revoked, the client refused) ends
// every leadership on it at once, and its Electors can no longer campaign
// (Campaign returns an error that is both ErrSessionLost and ErrClosed):
// make a new Session and new Electors. An Elector made by New has no
// shared Session: each candidacy takes a lease of its own, so that a lost
// lease ends one candidacy and the next Campaign starts afresh.
//
// # Many Campaigns at once
//
// A service with a leader per shard may start every shard's Campaign at
// once, on every process at once: a fleet's restart. The requests a
// candidacy makes to queue and to lead (a lease of its own, the arrival
// read, the queue key's create, the reads of the queue, the claims of the
// leader key, the releases) go through one limiter per client, which lets
// 32 of them be in flight at once and queues the rest, first come first
// served, those on a handover's path (a waiter's reads and claims, a
// release) ahead of new arrivals. Without it the requests of thousands of
// Campaigns pile up in the member faster than it applies them, every
// Session's renewals wait behind them (etcd v3.6 answers a renewal only
// once it has applied what it committed), and the leases lapse under load
// the member would have served in turn. What waits goes together: the
// requests queued of different elections (reads with reads, writes with
// writes) go as one transaction, each a nested transaction with its own
// Compares, so that one Raft entry, fsync and round trip serves up to 64
// candidacies; at most 4 such batches of a client are in flight. A batch
// etcd refuses whole (one election's keys not permitted, too many
// operations) is sent again request by request. Renewals and watches do
// not wait in the limiter. A create that finds its Session's lease gone
// ends the Session (ErrSessionLost) instead of retrying; one that finds
// its own lease gone starts again with a new one.
//
// # Resign, Close and errors
//
// Resign ends the Term before any I/O, stops the renewals and deletes the
// leader key and the queue key in one transaction (each guarded by its
// create revision): the next candidate leads at once. A candidacy's own
// lease, emptied and no longer renewed, is revoked by the next Campaign,
// Resign or Close, or expires on its own after the TTL: etcd takes about
// twice as long to revoke a lease as to delete a key, and a revoke in
// flight slows the next candidate, so it is kept off the handover's path.
// Resign is idempotent. If the delete fails, Resign returns the error and
// keeps the candidacy pending: the next Resign or Close tries again, and
// meanwhile nothing renews its own lease, so it expires after the TTL and
// takes the keys with it. Campaign's error paths release what they
// created, including a leader key whose creation's reply was lost. Close
// releases everything (keys and own leases) with a timeout of one lease
// window, stops every goroutine and leaves the client and a shared
// Session open: they are the caller's.
//
// Errors of the store are sorted alike everywhere in the package: a closed
// client, a permission or authentication error (etcd's "permission denied",
// "user name is empty", "authentication failed"; gRPC PermissionDenied,
// Unauthenticated, InvalidArgument) is final — Campaign returns it wrapped
// with the election's name, and a candidacy that meets one ends with
// ErrSessionLost carrying it — and everything else (a lost connection, a
// member without a Raft leader, a timeout) is retried after a pause that
// grows from 50 ms to 2 s, drawn at random within ±50% so that candidacies
// that failed together do not retry together, and reset once a request
// works; it is logged at most once per 5 s per candidacy, with the number
// of lines left out, so a retry is never silent. A watch that breaks is
// opened again after the same pauses.
//
// An invalid (stale) auth token is retried, not final. A client with a
// user name and password logs in again (a bcrypt check and a Raft write)
// for every stream it opens — each watch, and each renewal stream, which
// is why renewals share one, whose opening goes on past a renewal that
// stops waiting for it (etcd checks a renewal's token too, and refuses,
// with permission denied, final, one whose lease holds a key the user may
// no longer write) — and a request can then reach a member that
// has not applied that login yet, which answers "invalid auth token" (a
// watch's creation is cancelled with it). Such a request is retried as any
// other error is.
//
// Campaign and Resign return within 100 ms of their ctx ending whatever
// the store does: what they leave to release (keys, a lease) is tried for
// 40 ms, then released in the background, for at most one lease window;
// Close waits for those releases. Leases are drawn with IDs the client
// chooses, so a grant whose reply was lost is revoked, not left to expire.
//
// # Garbage and other clients of the store
//
// etcd lets any client with access to the prefix delete a key (etcdctl
// del), delete the whole prefix, revoke a lease, or put a key again
// without its lease. So a candidacy does not trust its lease alone: its
// watch covers its own queue key and, while it leads, the leader key. A
// DELETE of either — by another client, with the prefix, by a revoked or
// expired lease — or a PUT that makes it another's (no lease or another
// lease, another create revision, another candidate's record) ends the
// candidacy at once: a leader's Term ends with ErrSessionLost (measured in
// BENCHMARKS.md, "A leader notices another client": about a millisecond),
// a waiter's Campaign returns ErrSessionLost, and what is left of it is
// released. The rule fails closed: a renewal extends the Term only if the
// watch was live both when the leader took it (at or after its tick, when
// the renewal may have been sent and answered already: a watch live then
// covers the keys since they were made, see wait.go) and once it was
// answered, so a leader whose watch broke (a member restart, a lost
// stream) keeps its Term only to its current deadline unless the watch is
// back, and then it reads its keys again before trusting them.
//
// What is promised when someone else deletes the leader's leadership key:
// the leader and the next candidate learn of it from the same revision —
// the head of the queue claims at once — and the old Term ends at once (the tests assert that it ends long before its
// lease would tell, and log the order). That it ends before the next Term
// begins is not a guarantee: etcd delivers one event to two
// watch streams in no fixed order, and the old leader's process may be
// paused or slow. The token covers the rest: a store the leader writes to
// should fence on it (Fence, or comparing tokens), as it must for a
// paused process anyway.
//
// Keys that are not this package's fail closed (P8). A queue key without
// a lease never expires, so waiting for it would block the election for
// good: it is skipped (logged once). A leased queue key holds its place,
// whatever its name or value: it may be another program's candidate, and
// it goes with its lease. A leader key without a lease is deleted by the
// head of the queue (guarded by its revision: this package never writes
// one). A leased leader key that is malformed — its value not a record
// naming a queue key of its own lease — leads nobody: Leader returns a
// *MalformedKeyError (errors.Is ErrMalformedKey and election.ErrNoLeader)
// naming it and what is wrong, Observe reports no leader and logs it, and
// no candidate leads until it is deleted or its lease expires. A leader
// key whose token is below one this Elector has seen lead (a key another
// client attached a lease to after creating it) fails the same way: a
// token never runs backwards.
//
// # Upgrading from the previous key layout
//
// Versions before this layout kept one key per candidate, named the
// prefix plus the lease ID in 16 hex digits, and the oldest led. Both
// layouts' candidates can run in one election during a rolling upgrade
// without two leaders in the common case: the old code skips this
// layout's queue keys (they lie under a deeper path) and waits behind the
// leader key (a leased key it cannot parse), and a candidate of this
// layout does not create the leader key while a leased key of the old
// layout is first in its range (it looks again every 500 ms). The check
// and the creation are two requests, so an old candidate that registers
// between them can lead beside a new one: stop the old candidates before
// the new ones campaign, or give the upgraded service a new election name,
// to be sure.
//
// # Observe and Leader
//
// Leader is one linearizable read of the leader key. An Elector's Observe
// streams share one watch on the leader key alone. It first reads the
// key, then applies the watch's events from the revision after that read.
// When the watch breaks — compaction, a lost connection, a member without
// a Raft leader — it reads again and resumes, so it never skips the newest
// value, and it reports "no leader" (a zero Leader) when the key is
// absent or malformed.
//
// # Fencing
//
// Fence gives a clientv3.Cmp that holds exactly while the Term's
// leadership key exists with its token as its create revision and no
// leadership key older than it does (one Compare over the range of
// leadership keys up to the Term's own): in the If of a transaction it
// makes the writes happen only while the Term is current. Proclaim
// changes the Value observers see, guarded by the Term's key.
//
// # Priority, preemption and transfer
//
// The queue serves the highest Priority first, ties first come, first
// served: the priority leads the queue key's name, so every candidate
// reads the same order. A candidate of higher priority than the leader
// sorts above the leader's queue key; it waits until the leader goes,
// then goes first — it wakes only the leader (whose watch covers the
// keys above its own) and the candidate it displaces.
//
// Transfer (election.Transfer) reads the queue once to find its target
// (the whole queue: it is an operator's call), ends the Term with
// ErrTransferred, then hands over in one transaction that holds only
// while the Term's leadership key is the first, the target's queue key is
// the one read and a reservation after the leader (of an earlier version
// of this package) is the one it knows of (one it had not seen yet is
// read in the transaction's Else, and the transaction made again): it
// deletes the leader's leadership key, its queue key and such a
// reservation, creates the target's
// leadership key under the target's lease — named with the target's
// arrival, as the target would name it, so that its create revision is
// the target's token — and puts the target's hand-over mark, under its
// lease, with its record naming that leadership key: the event of that
// put, on the target's own watch, tells the target it leads, with no
// request after it (the leader's one write is the hand-over's last); the
// candidate behind the target does not see it. Transfer returns once
// the transaction has committed: the target leads from then on, as the
// store says. The new leader reads its key once its Term has begun (a
// read-only transaction): a mark naming a leadership key
// that no hand-over created (another client's put) lets its candidate
// report a Term only until that read's reply, which ends it with
// ErrSessionLost (a read that fails stops renewals from counting until a
// read of the key, as after a broken watch, finds it); its fenced writes
// are refused meanwhile, since the Fence
// compares the leadership key itself (the head of the queue, which
// watches the leadership keys, ignores such a mark when they do not
// change with it). A hand-over to a candidate that
// never acts on it (another program's key) holds the election until that
// candidate's lease ends or its keys are deleted; a candidate that leaves
// before it acts deletes the key with its queue key (its release deletes
// the key a hand-over names it by). Earlier versions of this package
// handed over through a hand-over key N/_t naming the target, which only
// the target could claim; candidates still honour one: a head of the
// queue that finds N/_t naming a queue key that is gone, or N/_t
// without a lease, deletes it. Candidates lists the waiting candidates
// with one read of the whole queue.
//
// RequestTransfer, from any Elector of the election (campaigning or not;
// elect transfer), puts the request key N/_r naming the leader's token
// and the target, only while that token leads, and watches the leader key
// until the target has created it. The leader's watch covers N/_r (it runs
// from its queue key to N/_r); it honours a request for its own token as
// Transfer with KeepLeading does, and answers one it cannot honour (no
// such waiting candidate) in the key. The requester deletes the key when
// it returns; a request for an earlier token is ignored.
//
// A leader made WithPreemption(hold) follows the keys above its own — of
// strictly higher priority (a candidate of equal priority that sorts
// above it through an arrival tie does not count) — through the watch it
// keeps anyway, and once one has been there hold without a break, hands
// over to the best of them as Transfer does, its Term ending with
// ErrPreempted.
package etcd
