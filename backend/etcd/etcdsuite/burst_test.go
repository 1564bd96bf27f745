package etcdsuite_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// requestCount counts what a client sends: each unary request and each
// message sent on a stream (a watch's create or cancel, a lease renewal),
// and the most unary requests it had in flight at once.
type requestCount struct {
	sent     atomic.Int64
	succ     atomic.Int64 // of sent, leaders' reads of their successor (succRead)
	plain    atomic.Int64 // of sent, unary requests but those reads: one count per request, so that a snapshot never splits one
	inFlight atomic.Int64
	most     atomic.Int64

	// Batches: transactions that carry requests of several elections.
	batches, batched atomic.Int64 // batches, and the requests in them
	mu               sync.Mutex
	mixed            []string        // batches that held two requests of one election (a fault)
	tops             map[string]bool // the first segments of a batch's elections, joined: "/no /ok"
	kinds            map[string]int  // what was sent, by kind (requestKind)
}

// note counts one request of kind k.
func (r *requestCount) note(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds == nil {
		r.kinds = map[string]int{}
	}
	r.kinds[k]++
}

// kindCounts returns the counts by kind so far.
func (r *requestCount) kindCounts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.kinds)
}

// kindsSince returns the kinds sent since the counts were then, and how
// many of each.
func (r *requestCount) kindsSince(then map[string]int) map[string]int {
	d := r.kindCounts()
	for k, n := range d {
		if d[k] = n - then[k]; d[k] == 0 {
			delete(d, k)
		}
	}
	return d
}

// kindsSeen returns the counts by kind, most first, as "kind ×n" lines.
func kindsSeen(cs ...*requestCount) string {
	all := map[string]int{}
	for _, c := range cs {
		c.mu.Lock()
		for k, n := range c.kinds {
			all[k] += n
		}
		c.mu.Unlock()
	}
	ks := slices.SortedFunc(maps.Keys(all), func(a, b string) int { return all[b] - all[a] })
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "\n\t%6d  %s", all[k], k)
	}
	return b.String()
}

// requestKind names the shape of a request: its method, and for a Txn its
// Compares and operations by type ("Txn c3 s[put range] f[range]"), or
// "batch" for a transaction of several elections' requests; for a stream
// message, its type.
func requestKind(method string, req any) string {
	_, name, _ := strings.Cut(method[1:], "/")
	switch r := req.(type) {
	case *pb.TxnRequest:
		ops := func(os []*pb.RequestOp) string {
			var ks []string
			for _, op := range os {
				switch {
				case op.GetRequestRange() != nil:
					ks = append(ks, "range")
				case op.GetRequestPut() != nil:
					ks = append(ks, "put")
				case op.GetRequestDeleteRange() != nil:
					ks = append(ks, "delete")
				case op.GetRequestTxn() != nil:
					ks = append(ks, "txn")
				}
			}
			return strings.Join(ks, " ")
		}
		if len(r.Compare) == 0 && len(r.Failure) == 0 && len(r.Success) > 1 {
			seen := map[string]bool{}
			for _, op := range r.Success {
				seen[electionOf(op)] = true
			}
			if len(seen) > 1 {
				return "Txn batch"
			}
		}
		return fmt.Sprintf("Txn c%d s[%s] f[%s]", len(r.Compare), ops(r.Success), ops(r.Failure))
	case *pb.WatchRequest:
		switch {
		case r.GetCreateRequest() != nil:
			return "Watch create"
		case r.GetCancelRequest() != nil:
			return "Watch cancel"
		case r.GetProgressRequest() != nil:
			return "Watch progress"
		}
	}
	if req != nil {
		return name + " " + fmt.Sprintf("%T", req)
	}
	return name
}

func (r *requestCount) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r.note(requestKind(method, req))
	if t, ok := req.(*pb.TxnRequest); ok && succRead(t) {
		r.succ.Add(1)
	} else {
		r.plain.Add(1)
	}
	r.sent.Add(1)
	if t, ok := req.(*pb.TxnRequest); ok && len(t.Compare) == 0 && len(t.Failure) == 0 && len(t.Success) > 1 {
		// A batch: operations of several elections (one request's
		// own operations, without Compares, are all of its election).
		seen, twice := map[string]bool{}, ""
		for _, op := range t.Success {
			name := electionOf(op)
			if seen[name] {
				twice = name
			}
			seen[name] = true
		}
		if len(seen) > 1 {
			r.batches.Add(1)
			r.batched.Add(int64(len(t.Success)))
			tops := map[string]bool{}
			for name := range seen {
				top, _, _ := strings.Cut(strings.TrimPrefix(name, "/"), "/")
				tops["/"+top] = true
			}
			r.mu.Lock()
			if twice != "" {
				r.mixed = append(r.mixed, fmt.Sprintf("%d requests, two of election %q", len(t.Success), twice))
			}
			if r.tops == nil {
				r.tops = map[string]bool{}
			}
			r.tops[strings.Join(slices.Sorted(maps.Keys(tops)), " ")] = true
			r.mu.Unlock()
		}
	}
	n := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// batchesSeen returns, under the lock (requests of a candidacy that
// gave up may still be sent), the faulty batches and the tops.
func (r *requestCount) batchesSeen() (mixed []string, tops map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mixed), maps.Clone(r.tops)
}

func (r *requestCount) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return s, err
	}
	return &countedSends{ClientStream: s, n: &r.sent, note: func(m any) { r.note(requestKind(method, m)) }}, nil
}

// sendsOn is a stream interceptor that counts in n the messages a client
// sends on its streams of method (every stream's, if method is "").
func sendsOn(method string, n *atomic.Int64) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, m string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, m, opts...)
		if err != nil || method != "" && m != method {
			return s, err
		}
		return &countedSends{ClientStream: s, n: n}, nil
	}
}

// electionOf returns the election a request of a batch is of: the name
// before the first "/_" segment of the first key it compares or reads (or
// before its last segment, for the reads of the previous layout's keys).
func electionOf(op *pb.RequestOp) string {
	var key []byte
	switch {
	case op.GetRequestRange() != nil:
		key = op.GetRequestRange().Key
	case op.GetRequestTxn() != nil:
		t := op.GetRequestTxn()
		switch {
		case len(t.Compare) > 0:
			key = t.Compare[0].Key
		case len(t.Success) > 0:
			return electionOf(t.Success[0])
		}
	case op.GetRequestPut() != nil:
		key = op.GetRequestPut().Key
	case op.GetRequestDeleteRange() != nil:
		key = op.GetRequestDeleteRange().Key
	}
	if name, _, ok := strings.Cut(string(key), "/_"); ok {
		return name
	}
	// A read of where the previous layout kept its keys: N/0…, N/a….
	return string(key[:max(0, strings.LastIndexByte(string(key), '/'))])
}

type countedSends struct {
	grpc.ClientStream
	n    *atomic.Int64
	note func(m any) // if not nil, told of each message
}

func (s *countedSends) SendMsg(m any) error {
	s.n.Add(1)
	if s.note != nil {
		s.note(m)
	}
	return s.ClientStream.SendMsg(m)
}

// With etcd auth on, a user allowed one election's keys and not
// another's campaigns in both at once on one client: requests of both
// elections go in batches (the limiter queues them together), and etcd
// refuses a batch whole when one of its requests may not be made. Each
// request then goes alone: every allowed election leads, every refused
// Campaign returns the permission error, and no batch holds two requests
// of one election.
func TestBatchRefusedForOneElection(t *testing.T) {
	const allowed, refused = 150, 30
	srv := etcdtest.New(t, embedetcd.Config{BcryptCost: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	defer cancel()
	root := etcdtest.Client(t, srv.Endpoints())
	if err := embedetcd.EnableAuth(ctx, root, "rootpw"); err != nil {
		t.Fatal(err)
	}
	admin := etcdtest.Client(t, srv.Endpoints(), func(c *clientv3.Config) { c.Username, c.Password = "root", "rootpw" })
	if err := embedetcd.AddUser(ctx, admin, "sched", "pw", "/ok/"); err != nil {
		t.Fatal(err)
	}
	count := new(requestCount)
	cli := etcdtest.Client(t, srv.Endpoints(), func(c *clientv3.Config) {
		c.Username, c.Password = "sched", "pw"
		c.DialOptions = append(c.DialOptions, grpc.WithChainUnaryInterceptor(count.unary))
	})
	s := newSession(t, cli, election.WithTTL(10*time.Second))
	var es []*etcd.Elector
	for i := range allowed + refused {
		name := fmt.Sprintf("/ok/%d", i)
		if i%6 == 5 {
			name = fmt.Sprintf("/no/%d", i)
		}
		es = append(es, onSession(t, s, name, "a"))
	}
	campaignOkNo(ctx, t, es, rpctypes.ErrPermissionDenied)
	mixed, tops := count.batchesSeen()
	for _, m := range mixed {
		t.Errorf("a batch held two requests of one election: %s", m)
	}
	t.Logf("%d batches of %.1f requests on average", count.batches.Load(), float64(count.batched.Load())/float64(max(count.batches.Load(), 1)))
	if !tops["/no /ok"] {
		t.Errorf("no batch held requests of both elections' prefixes (batches of %v)", tops)
	}
	if err := s.Err(); err != nil {
		t.Errorf("the Session ended: %v", err)
	}
}

// campaignOkNo calls Campaign on every Elector of es at once, and checks
// that those of elections under /ok/ lead and those under /no/ fail with
// noErr.
func campaignOkNo(ctx context.Context, t *testing.T, es []*etcd.Elector, noErr error) {
	t.Helper()
	results := make([]<-chan result, len(es))
	for i, e := range es {
		results[i] = campaignAsync(ctx, e)
	}
	for i, ch := range results {
		r := await(t, ch)
		switch name := es[i].Name(); {
		case strings.HasPrefix(name, "/ok/") && r.err != nil:
			t.Errorf("%s: %v", name, r.err)
		case strings.HasPrefix(name, "/no/") && !errors.Is(r.err, noErr):
			t.Errorf("%s: Campaign returned %v, %v; want %v", name, r.t, r.err, noErr)
		}
	}
}

// TestBatchWithALapsedLease: two Sessions on one client, the lease of one
// revoked by another client just before a burst of Campaigns on both. etcd
// refuses a transaction as a whole when a put names a lease it no longer
// knows, so a batch that holds one create of the revoked Session's fails
// for all: each request then goes alone, and only the revoked Session's
// candidacies meet the lapsed lease. The other Session lives on, and each
// of its elections leads.
func TestBatchWithALapsedLease(t *testing.T) {
	const live, revoked = 150, 30
	eps := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	defer cancel()
	admin := newClient(t, eps)
	count := new(requestCount)
	cli := dialClient(t, eps, grpc.WithChainUnaryInterceptor(count.unary))
	s := newSession(t, cli, election.WithTTL(30*time.Second))
	gone := newSession(t, cli, election.WithTTL(30*time.Second)) // renewed every 10 s: it learns of the revoke late
	var es []*etcd.Elector
	for i := range live + revoked {
		if i%6 == 5 {
			es = append(es, onSession(t, gone, fmt.Sprintf("/no/%d", i), "a"))
		} else {
			es = append(es, onSession(t, s, fmt.Sprintf("/ok/%d", i), "a"))
		}
	}
	if _, err := admin.Revoke(ctx, gone.Lease()); err != nil {
		t.Fatal(err)
	}
	campaignOkNo(ctx, t, es, election.ErrSessionLost)
	if _, tops := count.batchesSeen(); !tops["/no /ok"] {
		t.Errorf("no batch held requests of both Sessions' elections (batches of %v)", tops)
	}
	if err := s.Err(); err != nil {
		t.Errorf("the live Session ended: %v", err)
	}
	if gone.Err() == nil {
		t.Error("the revoked Session did not end")
	}
}

// A service with a leader per shard starts a Campaign per shard, all at
// once, on a Session per process: a few hundred elections × 3 candidates
// on three Sessions (three clients, TTL 5 s), every Campaign started
// together.
// Every election leads, within a generous deadline; each client keeps at
// most a bounded number of requests in flight, whatever the number of
// Campaigns; and the requests sent until every candidate leads or waits on
// its watch stay within a bound per election (etcd's concurrency.Election
// sends 8 per election in this shape: a transaction and a read per
// candidate, a watch per waiter). Sent all at once, the Campaigns' requests would pile up in
// the member, whose lease renewals then come back too late: the Sessions'
// leases would lapse under the load, and every candidacy on them would
// retry.
func TestBurstOfElectionsOnSessions(t *testing.T) {
	const (
		n           = 300
		clients     = 3
		perElection = 8  // requests sent per election, at most (concurrency.Election: 8)
		inFlight    = 44 // unary requests in flight per client, at most: the limiter's 32 alone and 4 batches, and a few others
	)
	eps := startEtcd(t)
	counts := make([]*requestCount, clients)
	sessions := make([]*etcd.Session, clients)
	for i := range counts {
		counts[i] = new(requestCount)
		cli := dialClient(t, eps, grpc.WithChainUnaryInterceptor(counts[i].unary), grpc.WithChainStreamInterceptor(counts[i].stream))
		// TTL 5 s: the burst keeps both cores busy under the race
		// detector, and a machine shared with other work can stall a
		// renewal for longer than a 2 s lease allows.
		sessions[i] = newSession(t, cli, election.WithTTL(5*time.Second))
	}
	es := make([]*etcd.Elector, 0, n*clients)
	for j := range n {
		for i := range clients {
			es = append(es, onSession(t, sessions[i], fmt.Sprintf("/burst/%d", j), fmt.Sprintf("c%d", i)))
		}
	}
	sent := func() int64 {
		var s int64
		for _, c := range counts {
			s += c.sent.Load()
		}
		return s
	}
	before := sent() // the Sessions' grants
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var (
		wg       sync.WaitGroup
		led      = make([]atomic.Bool, n)
		returned = make([]atomic.Bool, len(es))
		leading  atomic.Int64
		failed   atomic.Int64
		firstErr atomic.Value
	)
	began := time.Now()
	for k, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := e.Campaign(ctx)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				if failed.Add(1) == 1 {
					firstErr.Store(err)
				}
				if errors.Is(err, election.ErrClosed) {
					return // the Session is gone
				}
				// A Term that ended as it began: campaign again, as
				// election.Run does.
			}
			returned[k].Store(true)
			if led[k/clients].CompareAndSwap(false, true) {
				leading.Add(1)
			}
		}()
	}
	// Settled: every election has led, and every candidate leads or waits
	// on its watch.
	settled := func() bool {
		if leading.Load() < n {
			return false
		}
		for k, e := range es {
			if !returned[k].Load() && !probeSettled(e) {
				return false
			}
		}
		return true
	}
	for !settled() && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	took, requests := time.Since(began), sent()-before
	var most int64
	for _, c := range counts {
		most = max(most, c.most.Load())
	}
	t.Logf("%d elections × %d: %d led, settled after %v; %d requests (%.1f per election); at most %d in flight per client; by kind:%s",
		n, clients, leading.Load(), took.Round(time.Millisecond), requests, float64(requests)/n, most, kindsSeen(counts...))
	cancel()
	wg.Wait()
	if failed.Load() > 0 {
		t.Logf("%d Campaigns failed; the first: %v", failed.Load(), firstErr.Load())
	}
	if l := leading.Load(); l < n {
		t.Errorf("%d of %d elections led within the deadline", l, n)
	}
	if per := float64(requests) / n; per > perElection {
		t.Errorf("%.1f requests per election, want at most %d", per, perElection)
	}
	if most > inFlight {
		t.Errorf("a client had %d requests in flight at once, want at most %d", most, inFlight)
	}
	var batches, batched int64
	for _, c := range counts {
		batches, batched = batches+c.batches.Load(), batched+c.batched.Load()
		mixed, _ := c.batchesSeen()
		for _, m := range mixed {
			t.Errorf("a batch held two requests of one election: %s", m)
		}
	}
	var succ int64
	for _, c := range counts {
		succ += c.succ.Load()
	}
	t.Logf("%d batches of %.1f requests on average; %d reads of a leader's successor", batches, float64(batched)/float64(max(batches, 1)), succ)
	if batches == 0 {
		t.Error("no batch was sent: every queued request went alone")
	}
	for _, s := range sessions {
		if err := s.Err(); err != nil {
			t.Errorf("a Session ended: %v", err)
		}
	}
}

// TestGivenUpWriteNotOvertaken: Campaigns whose ctx ends while their
// creates are in a batch in flight return at once, and release: the
// release must not overtake the create, or the create, applied after it,
// leaves a queue key (and a leadership key: the first candidate of an
// empty election claims in its create) that its Session renews for good —
// an election held by a candidacy that is gone. Here the member answers
// the first batch of creates only once every Campaign has returned
// (an interceptor holds it, then sends it whatever the caller did, as a
// member that had received it would apply it); once the releases have
// run, none of those elections holds a key.
func TestGivenUpWriteNotOvertaken(t *testing.T) {
	const n = 100
	eps := startEtcd(t)
	admin := newClient(t, eps)
	h := &heldBatch{held: make(chan []string, 1), release: make(chan struct{})}
	cli := dialClient(t, eps, grpc.WithChainUnaryInterceptor(h.unary))
	s := newSession(t, cli, election.WithTTL(30*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make([]<-chan result, n)
	for i := range n {
		results[i] = campaignAsync(ctx, onSession(t, s, fmt.Sprintf("/gaveup/%d", i), "a"))
	}
	var inBatch []string
	select {
	case inBatch = <-h.held:
	case <-time.After(patience):
		close(h.release)
		t.Fatal("no batch of creates was sent")
	}
	cancel()
	for _, ch := range results {
		await(t, ch) // each returns within about 100 ms of its ctx, the batch still held
	}
	close(h.release)
	for _, name := range inBatch {
		for deadline := time.Now().Add(patience); ; time.Sleep(10 * time.Millisecond) {
			resp, err := admin.Get(ctxT(t), name+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("election %s, whose Campaign gave up with its create in a batch, still holds %d keys (the first %s) after its release: the release overtook the create", name, len(resp.Kvs), resp.Kvs[0].Key)
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Errorf("the Session ended: %v", err)
	}
}

// heldBatch holds a client's first batch of creates (a transaction of
// nested ones that put) until release is closed, and then sends it
// whatever its ctx: held receives the elections it is of.
type heldBatch struct {
	once    sync.Once
	held    chan []string
	release chan struct{}
}

func (h *heldBatch) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r, ok := req.(*pb.TxnRequest)
	if !ok || method != methodTxn || len(r.Compare) > 0 || len(r.Success) < 2 || !puts(r) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	first := false
	h.once.Do(func() { first = true })
	if !first {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var names []string
	for _, op := range r.Success {
		names = append(names, electionOf(op))
	}
	h.held <- names
	<-h.release
	return invoker(context.WithoutCancel(ctx), method, req, reply, cc, opts...)
}

// puts reports whether a transaction puts a key, in it or in one nested.
func puts(r *pb.TxnRequest) bool {
	for _, op := range r.Success {
		if op.GetRequestPut() != nil || op.GetRequestTxn() != nil && puts(op.GetRequestTxn()) {
			return true
		}
	}
	return false
}

// A create refused by a claim made since its arrival read arrives again
// at the refusal's revision, with no read in between. B's arrival read is
// served, and its reply held until A has led: A's leadership key is named
// for a later arrival than B's, so B's create (which carries a claim, as
// B saw no leader) is refused. B then sends one create more, finds A's key
// ahead of its own in what that create reads, and waits: three requests
// in all (before, a read after the refusal and, with A's key outside the
// first window read, a read of the queue besides). B's key sorts behind
// A's, and A's Resign hands over to B.
func TestRefusedCreateArrivesAgainWithoutARead(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	h := newHold("/etcdserverpb.KV/Range", 1, true)
	count := new(requestCount)
	cliB := dialClient(t, eps, grpc.WithChainUnaryInterceptor(h.unary, count.unary))
	sb := newSession(t, cliB, election.WithTTL(30*time.Second))
	b := onSession(t, sb, "/refused", "b")
	resB := campaignAsync(ctx, b)
	h.awaitHeld(t)
	cliA := newClient(t, eps)
	if _, err := cliA.Put(ctx, "/elsewhere", ""); err != nil { // A arrives at a later revision than B
		t.Fatal(err)
	}
	a := newElector(t, cliA, "/refused", "a")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(h.release)
	for !probeSettled(b) {
		select {
		case r := <-resB:
			t.Fatalf("B's Campaign returned %v, %v while A leads", r.t, r.err)
		case <-ctx.Done():
			t.Fatal("B never waited on its watch")
		case <-time.After(5 * time.Millisecond):
		}
	}
	count.mu.Lock()
	kinds := maps.Clone(count.kinds)
	count.mu.Unlock()
	creates, others := 0, 0
	for k, n := range kinds {
		if strings.HasPrefix(k, "Txn c3 s[put ") {
			creates += n
		} else if !strings.HasPrefix(k, "Range ") && !strings.HasPrefix(k, "LeaseGrant ") {
			others += n
		}
	}
	if creates != 2 || others != 0 {
		t.Errorf("B sent %d creates and %d other requests after its arrival read, want 2 and 0:%s", creates, others, kindsSeen(count))
	}
	qa, qb := queueKeyOf(t, ctx, cliB, "/refused", "a"), queueKeyOf(t, ctx, cliB, "/refused", "b")
	if qb >= qa {
		t.Errorf("B's key %s sorts at or above the leader A's %s", qb, qa)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := await(t, resB)
	if r.err != nil {
		t.Fatalf("B's Campaign after A's Resign: %v", r.err)
	}
	if r.t.Token() <= ta.Token() {
		t.Errorf("B's token %d is not above A's %d", r.t.Token(), ta.Token())
	}
}

// queueKeyOf returns the queue key of the candidate id of election name.
func queueKeyOf(t *testing.T, ctx context.Context, cli *clientv3.Client, name, id string) string {
	t.Helper()
	resp, err := cli.Get(ctx, name+"/_c/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/h") {
			continue // a hand-over mark
		}
		if ld, err := record.Decode(kv.Value); err == nil && ld.ID == id {
			return string(kv.Key)
		}
	}
	t.Fatalf("no queue key of %s in %s", id, name)
	return ""
}
