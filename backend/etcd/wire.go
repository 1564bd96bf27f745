package etcd

import (
	"context"
	"math"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// The requests an Elector sends through its client's limiter (limit.go)
// are built as etcd's protocol messages, and sent by the client's own KV
// stub (clientv3.RetryKVClient, with the client's call options and error
// handling). clientv3's builders would do the same work through copies:
// since etcd v3.7 its Cmp holds a message that Compare, WithRange, OpTxn,
// Txn.If and the conversion to a request each clone by reflection. A
// leader's release (a transaction of a dozen comparisons) went through
// some fifty such clones on the path a handover waits for, and built 17
// KB of garbage where 5 KB do.

// cmpCreate compares key's create revision (0: the key is absent) with rev.
func cmpCreate(key string, rev int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, TargetUnion: &pb.Compare_CreateRevision{CreateRevision: rev}}
}

// cmpMod compares key's mod revision with rev.
func cmpMod(key string, rev int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_MOD, TargetUnion: &pb.Compare_ModRevision{ModRevision: rev}}
}

// cmpLease compares key's lease with lease (0: none).
func cmpLease(key string, lease int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_LEASE, TargetUnion: &pb.Compare_Lease{Lease: lease}}
}

// cmpValue compares key's value with value; it fails if key is absent.
func cmpValue(key, value string) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_VALUE, TargetUnion: &pb.Compare_Value{Value: []byte(value)}}
}

// cmpRange makes c hold for every key of [c's key, end); on a range
// without keys it compares as a key that is absent.
func cmpRange(c *pb.Compare, end string) *pb.Compare {
	c.RangeEnd = []byte(end)
	return c
}

// An opOption sets a field of a request (clientv3's OpOptions of the
// same names, for the fields this package uses).
type opOption struct {
	kind optKind
	s    string
	n    int64
}

type optKind uint8

const (
	optRange optKind = iota + 1
	optLimit
	optSerializable
	optCountOnly
	optDescending
	optLease
	optIgnoreValue
	optIgnoreLease
)

func withRange(end string) opOption        { return opOption{kind: optRange, s: end} }
func withLimit(n int64) opOption           { return opOption{kind: optLimit, n: n} }
func withSerializable() opOption           { return opOption{kind: optSerializable} }
func withCountOnly() opOption              { return opOption{kind: optCountOnly} }
func withIgnoreValue() opOption            { return opOption{kind: optIgnoreValue} }
func withIgnoreLease() opOption            { return opOption{kind: optIgnoreLease} }
func withLease[L ~int64](lease L) opOption { return opOption{kind: optLease, n: int64(lease)} }
func withKeysDescending() opOption         { return opOption{kind: optDescending} }

// opGet reads key, or with withRange the keys of [key, end).
func opGet(key string, opts ...opOption) *pb.RequestOp {
	r := &pb.RangeRequest{Key: []byte(key)}
	for _, o := range opts {
		switch o.kind {
		case optRange:
			r.RangeEnd = []byte(o.s)
		case optLimit:
			r.Limit = o.n
		case optSerializable:
			r.Serializable = true
		case optCountOnly:
			r.CountOnly = true
		case optDescending:
			r.SortOrder, r.SortTarget = pb.RangeRequest_DESCEND, pb.RangeRequest_KEY
		}
	}
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

// opPut puts value at key; with withIgnoreValue it sends no value (value
// should be "": clientv3 would send it, and etcd refuse the put).
func opPut(key, value string, opts ...opOption) *pb.RequestOp {
	r := &pb.PutRequest{Key: []byte(key), Value: []byte(value)}
	for _, o := range opts {
		switch o.kind {
		case optLease:
			r.Lease = o.n
		case optIgnoreValue:
			r.IgnoreValue, r.Value = true, nil
		case optIgnoreLease:
			r.IgnoreLease = true
		}
	}
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: r}}
}

// opDelete deletes key.
func opDelete(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(key)}}}
}

// opTxn nests a transaction.
func opTxn(cmps []*pb.Compare, then, els []*pb.RequestOp) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Compare: cmps, Success: then, Failure: els}}}
}

// A txn is a transaction's parts, for commit to send alone or in a
// batch, or send to send at once.
type txn struct {
	cmps      []*pb.Compare
	then, els []*pb.RequestOp
}

func newTxn() *txn { return &txn{} }

func (t *txn) If(cs ...*pb.Compare) *txn      { t.cmps = append(t.cmps, cs...); return t }
func (t *txn) Then(ops ...*pb.RequestOp) *txn { t.then = append(t.then, ops...); return t }
func (t *txn) Else(ops ...*pb.RequestOp) *txn { t.els = append(t.els, ops...); return t }

// kvStub sends requests as the client's KV does: through the client's
// connection and interceptors (retries, authentication), with the
// client's call options.
type kvStub struct {
	kv   pb.KVClient
	opts []grpc.CallOption
}

// newKVStub returns cli's stub. The client does not export its call
// options (its message size limits, wait for ready): they are read from
// a transaction its KV hands to a stub that keeps them and sends nothing.
// Should that read find none (a client that no longer hands them so),
// the stub takes clientv3's defaults.
func newKVStub(cli *clientv3.Client) *kvStub {
	return &kvStub{kv: clientv3.RetryKVClient(cli), opts: clientCallOpts(cli)}
}

func clientCallOpts(cli *clientv3.Client) (opts []grpc.CallOption) {
	defer func() {
		if recover() != nil || len(opts) == 0 {
			opts = defaultCallOpts()
		}
		// The stub appends its retry policy to a read's options: each
		// call gets a copy, never a shared array.
		opts = slices.Clip(opts)
	}()
	var o optsKeeper
	_, _ = clientv3.NewKVFromKVClient(&o, cli).Txn(context.Background()).Then(clientv3.OpDelete("\x00")).Commit()
	return slices.Clone(o.opts)
}

// defaultCallOpts are clientv3's call options for a client configured
// with no message size limits.
func defaultCallOpts() []grpc.CallOption {
	return []grpc.CallOption{grpc.WaitForReady(true), grpc.MaxCallSendMsgSize(2 * 1024 * 1024), grpc.MaxCallRecvMsgSize(math.MaxInt32)}
}

// optsKeeper is a KV stub that keeps the options of a transaction and
// sends nothing (newKVStub).
type optsKeeper struct {
	pb.KVClient
	opts []grpc.CallOption
}

func (o *optsKeeper) Txn(_ context.Context, _ *pb.TxnRequest, opts ...grpc.CallOption) (*pb.TxnResponse, error) {
	o.opts = opts
	return &pb.TxnResponse{}, nil
}

// txn sends t.
func (s *kvStub) txn(ctx context.Context, t *pb.TxnRequest) (*pb.TxnResponse, error) {
	resp, err := s.kv.Txn(ctx, t, s.opts...)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return resp, nil
}

// get sends r; the stub adds the retry policy of a read, as for the
// client's KV.
func (s *kvStub) get(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp, err := s.kv.Range(ctx, r, s.opts...)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return resp, nil
}

// send sends t at once, outside the limiter.
func (e *Elector) send(ctx context.Context, t *txn) (*clientv3.TxnResponse, error) {
	resp, err := limiterOf(e.cli).stub.txn(ctx, &pb.TxnRequest{Compare: t.cmps, Success: t.then, Failure: t.els})
	if err != nil {
		return nil, err
	}
	return (*clientv3.TxnResponse)(resp), nil
}
