package etcdsuite_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// gRPC methods of etcd that tests hold back.
const (
	methodTxn       = "/etcdserverpb.KV/Txn"
	methodKeepAlive = "/etcdserverpb.Lease/LeaseKeepAlive"
)

// hold holds back calls of one gRPC method of a real client talking to a
// real etcd, so that a test can order a request against other events: the
// first n calls stop either before the request is sent or (after) once the
// reply has arrived, until release is closed. The server is never faked:
// only the moment the client sends or sees the answer moves.
type hold struct {
	method  string
	after   bool          // hold the reply (the request has been served), not the request
	left    atomic.Int32  // calls still to hold
	held    chan struct{} // one value per held call
	release chan struct{}
}

func newHold(method string, n int, after bool) *hold {
	h := &hold{method: method, after: after, held: make(chan struct{}, n), release: make(chan struct{})}
	h.left.Store(int32(n))
	return h
}

// take reports whether this call of method is to be held.
func (h *hold) take(method string) bool {
	return method == h.method && h.left.Add(-1) >= 0
}

// wait signals that a call is held and waits for release or ctx's end.
func (h *hold) wait(ctx context.Context) error {
	h.held <- struct{}{}
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitHeld waits until a call is held.
func (h *hold) awaitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(patience):
		t.Fatalf("no %s call was held", h.method)
	}
}

func (h *hold) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !h.take(method) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if !h.after {
		if err := h.wait(ctx); err != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if werr := h.wait(ctx); werr != nil {
		return werr
	}
	return err
}

func (h *hold) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || !h.take(method) {
		return s, err
	}
	return &heldStream{ClientStream: s, h: h, ctx: ctx}, nil
}

// heldStream holds its first send (or, with after, its first receive).
type heldStream struct {
	grpc.ClientStream
	h    *hold
	ctx  context.Context
	done atomic.Bool
}

func (s *heldStream) SendMsg(m any) error {
	if !s.h.after && s.done.CompareAndSwap(false, true) {
		if err := s.h.wait(s.ctx); err != nil {
			return err
		}
	}
	return s.ClientStream.SendMsg(m)
}

func (s *heldStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if s.h.after && s.done.CompareAndSwap(false, true) {
		if werr := s.h.wait(s.ctx); werr != nil {
			return werr
		}
	}
	return err
}

// dialClient is a client of eps dialled with extra options (interceptors).
func dialClient(t *testing.T, eps []string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	return etcdtest.Client(t, eps, func(c *clientv3.Config) {
		c.DialOptions = append(c.DialOptions, opts...)
	})
}

// heldClient is a client of eps whose calls go through the holds.
func heldClient(t *testing.T, eps []string, holds ...*hold) *clientv3.Client {
	t.Helper()
	var opts []grpc.DialOption
	for _, h := range holds {
		opts = append(opts, grpc.WithChainUnaryInterceptor(h.unary), grpc.WithChainStreamInterceptor(h.stream))
	}
	return dialClient(t, eps, opts...)
}

// txnLog records the Txn requests a client sends.
type txnLog struct {
	mu   sync.Mutex
	reqs []*pb.TxnRequest
}

// succRead reports whether r is a leader's read of its successor, the
// candidate just below it, which it sends once its Term has begun: ranges
// alone, each sorted down with a limit of one.
func succRead(r *pb.TxnRequest) bool {
	if len(r.Compare) > 0 || len(r.Failure) > 0 || len(r.Success) == 0 {
		return false
	}
	for _, op := range r.Success {
		rr := op.GetRequestRange()
		if rr == nil || rr.SortOrder != pb.RangeRequest_DESCEND || rr.Limit != 1 {
			return false
		}
	}
	return true
}

// txnLog records a client's Txn requests, but for the leader's reads of
// its successor (succRead), which come after its Campaign returned.
func (l *txnLog) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*pb.TxnRequest); ok && method == methodTxn && !succRead(r) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r)
		l.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (l *txnLog) all() []*pb.TxnRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// loggedClient is a client of eps whose Txn requests l records.
func loggedClient(t *testing.T, eps []string, l *txnLog) *clientv3.Client {
	t.Helper()
	return dialClient(t, eps, grpc.WithChainUnaryInterceptor(l.unary))
}

const methodWatch = "/etcdserverpb.Watch/Watch"

// watchLog records what a client's watch streams receive: how many
// watches were created, the keys of the events delivered, and, by watch,
// the key each was created on and its events' keys.
type watchLog struct {
	mu      sync.Mutex
	created int
	keys    []string
	starts  map[int64]string   // watch ID → the key it was created on
	events  map[int64][]string // watch ID → its events' keys
}

func (l *watchLog) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != methodWatch {
		return s, err
	}
	return &loggedStream{ClientStream: s, l: l}, nil
}

type loggedStream struct {
	grpc.ClientStream
	l *watchLog
}

func (s *loggedStream) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok {
		if c := r.GetCreateRequest(); c != nil {
			s.l.mu.Lock()
			if s.l.starts == nil {
				s.l.starts, s.l.events = map[int64]string{}, map[int64][]string{}
			}
			s.l.starts[c.WatchId] = string(c.Key)
			s.l.mu.Unlock()
		}
	}
	return s.ClientStream.SendMsg(m)
}

func (s *loggedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if r, ok := m.(*pb.WatchResponse); ok && err == nil {
		s.l.mu.Lock()
		if r.Created {
			s.l.created++
		}
		for _, ev := range r.Events {
			s.l.keys = append(s.l.keys, string(ev.Kv.Key))
			if s.l.events != nil {
				s.l.events[r.WatchId] = append(s.l.events[r.WatchId], string(ev.Kv.Key))
			}
		}
		s.l.mu.Unlock()
	}
	return err
}

// eventsOf returns the keys of the events delivered to the watches
// created on key, in the order they came.
func (l *watchLog) eventsOf(key string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []int64
	for id, k := range l.starts {
		if k == key {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids {
		out = append(out, l.events[id]...)
	}
	return out
}

// state returns how many watches were created and the events' keys.
func (l *watchLog) state() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.created, slices.Clone(l.keys)
}

// watchedClient is a client of eps whose watch streams l records.
func watchedClient(t *testing.T, eps []string, l *watchLog) *clientv3.Client {
	t.Helper()
	return dialClient(t, eps, grpc.WithChainStreamInterceptor(l.stream))
}

// heldSuccReads holds a client's reads of a leader's successor (succRead)
// until release is closed.
type heldSuccReads struct {
	once    sync.Once
	held    chan struct{} // closed when the first is held
	release chan struct{}
}

func (h *heldSuccReads) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*pb.TxnRequest); ok && method == methodTxn && succRead(r) {
		h.once.Do(func() { close(h.held) })
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// TestGuardWhileReadingSuccessor: a new leader reads its successor once
// its Term has begun; while that read is out (held here), its watch is
// still followed. Another client deletes the leader's leadership key
// meanwhile: the Term ends at once, not when the read returns.
func TestGuardWhileReadingSuccessor(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	admin := newClient(t, eps)
	h := &heldSuccReads{held: make(chan struct{}), release: make(chan struct{})}
	defer close(h.release)
	const name = "/guard/succ"
	a := newElector(t, newClient(t, eps), name, "a", election.WithTTL(10*time.Second))
	b := newElector(t, dialClient(t, eps, grpc.WithChainUnaryInterceptor(h.unary)), name, "b", election.WithTTL(10*time.Second))
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	waitQueue(t, admin, name, 2)
	r := handOver(t, ctx, a, ta, rb)
	select {
	case <-h.held:
	case <-time.After(patience):
		t.Fatal("b never read its successor")
	}
	lkey, err := b.FenceKey(r.t)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx, lkey); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.t.Done():
		if !errors.Is(r.t.Err(), election.ErrSessionLost) {
			t.Errorf("the Term ended with %v; want ErrSessionLost", r.t.Err())
		}
	case <-time.After(patience):
		t.Fatalf("b's Term did not end within %v of its leadership key's deletion while its read of its successor was held", patience)
	}
}
