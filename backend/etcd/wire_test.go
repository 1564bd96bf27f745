package etcd

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"google.golang.org/grpc"

	"github.com/electkit/election"
)

// reqKeeper is a KV stub that keeps the transaction it is given.
type reqKeeper struct {
	pb.KVClient
	req *pb.TxnRequest
}

func (k *reqKeeper) Txn(_ context.Context, in *pb.TxnRequest, _ ...grpc.CallOption) (*pb.TxnResponse, error) {
	k.req = in
	return &pb.TxnResponse{}, nil
}

// TestWireMatchesClient checks that each builder of wire.go makes the
// message clientv3's builder of the same name sends.
func TestWireMatchesClient(t *testing.T) {
	const k, end = "/e/_c/0001", "/e/_c0"
	cases := []struct {
		name   string
		ours   *pb.TxnRequest
		theirs func(clientv3.Txn) clientv3.Txn
	}{
		{"compares", &pb.TxnRequest{Compare: []*pb.Compare{cmpCreate(k, 5), cmpCreate(k, 0), cmpMod(k, 9), cmpLease(k, 0x77), cmpLease(k, 0), cmpValue(k, "v"), cmpValue(k, ""), cmpRange(cmpCreate(k, 0), end), cmpRange(cmpCreate(k, 3), end)}},
			func(x clientv3.Txn) clientv3.Txn {
				return x.If(clientv3.Compare(clientv3.CreateRevision(k), "=", 5), clientv3.Compare(clientv3.CreateRevision(k), "=", 0),
					clientv3.Compare(clientv3.ModRevision(k), "=", 9), clientv3.Compare(clientv3.LeaseValue(k), "=", clientv3.LeaseID(0x77)),
					clientv3.Compare(clientv3.LeaseValue(k), "=", 0), clientv3.Compare(clientv3.Value(k), "=", "v"), clientv3.Compare(clientv3.Value(k), "=", ""),
					clientv3.Compare(clientv3.CreateRevision(k), "=", 0).WithRange(end), clientv3.Compare(clientv3.CreateRevision(k), "=", 3).WithRange(end))
			}},
		{"reads", &pb.TxnRequest{Success: []*pb.RequestOp{opGet(k), opGet(k, withRange(end), withLimit(3)), opGet(k, withRange(end), withLimit(1), withSerializable()),
			opGet(k, withKeysDescending(), withLimit(1), withRange(end)), opGet(k, withCountOnly())}},
			func(x clientv3.Txn) clientv3.Txn {
				return x.Then(clientv3.OpGet(k), clientv3.OpGet(k, clientv3.WithRange(end), clientv3.WithLimit(3)),
					clientv3.OpGet(k, clientv3.WithRange(end), clientv3.WithLimit(1), clientv3.WithSerializable()),
					clientv3.OpGet(k, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1), clientv3.WithRange(end)),
					clientv3.OpGet(k, clientv3.WithCountOnly()))
			}},
		{"writes", &pb.TxnRequest{Success: []*pb.RequestOp{opPut(k, "v"), opPut(k, "v", withLease(clientv3.LeaseID(0x55))), opPut(k, "", withIgnoreValue(), withIgnoreLease()), opDelete(k)},
			Failure: []*pb.RequestOp{opDelete(end)}},
			func(x clientv3.Txn) clientv3.Txn {
				return x.Then(clientv3.OpPut(k, "v"), clientv3.OpPut(k, "v", clientv3.WithLease(0x55)),
					clientv3.OpPut(k, "", clientv3.WithIgnoreValue(), clientv3.WithIgnoreLease()), clientv3.OpDelete(k)).Else(clientv3.OpDelete(end))
			}},
		{"nested", &pb.TxnRequest{Compare: []*pb.Compare{cmpCreate(k, 4)}, Success: []*pb.RequestOp{
			opTxn([]*pb.Compare{cmpRange(cmpCreate(k, 0), end), cmpValue(end, k)}, []*pb.RequestOp{opDelete(end), opTxn(nil, []*pb.RequestOp{opGet(k)}, nil)}, []*pb.RequestOp{opGet(end)})}},
			func(x clientv3.Txn) clientv3.Txn {
				inner := clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpGet(k)}, nil)
				return x.If(clientv3.Compare(clientv3.CreateRevision(k), "=", 4)).Then(clientv3.OpTxn(
					[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0).WithRange(end), clientv3.Compare(clientv3.Value(end), "=", k)},
					[]clientv3.Op{clientv3.OpDelete(end), inner}, []clientv3.Op{clientv3.OpGet(end)}))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var keep reqKeeper
			if _, err := tc.theirs(clientv3.NewKVFromKVClient(&keep, nil).Txn(t.Context())).Commit(); err != nil {
				t.Fatal(err)
			}
			if keep.req == nil {
				t.Fatal("clientv3 sent no transaction")
			}
			if got, want := tc.ours.String(), keep.req.String(); got != want {
				t.Errorf("ours:\n%s\nclientv3's:\n%s", got, want)
			}
		})
	}
}

// TestKVStubOptions checks that the stub takes the client's call options
// (its message size limits among them), not gRPC's defaults.
func TestKVStubOptions(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, MaxCallSendMsgSize: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s := newKVStub(cli)
	if len(s.opts) == 0 {
		t.Fatal("the stub took no call options from the client")
	}
	var send, wait, recv bool
	for _, o := range s.opts {
		switch o := o.(type) {
		case grpc.MaxSendMsgSizeCallOption:
			send = o.MaxSendMsgSize == 1<<10
		case grpc.FailFastCallOption:
			wait = !o.FailFast
		case grpc.MaxRecvMsgSizeCallOption:
			recv = o.MaxRecvMsgSize == math.MaxInt32
		}
	}
	if !send || !wait || !recv {
		t.Errorf("the stub's options %#v: want the client's MaxCallSendMsgSize (%v), wait for ready (%v), no receive limit (%v)", s.opts, send, wait, recv)
	}
	if cap(s.opts) != len(s.opts) {
		t.Errorf("the stub's options have room to grow (cap %d, len %d): an append by one call would be seen by another", cap(s.opts), len(s.opts))
	}
}

// TestClientWithoutConnection checks that a client with no gRPC
// connection (clientv3.NewCtxClient, an embedded server's v3client) is
// refused with a clear error, not a panic at the first request.
func TestClientWithoutConnection(t *testing.T) {
	cli := clientv3.NewCtxClient(t.Context())
	if _, err := New(cli, "/e"); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "connection") {
		t.Errorf("New: %v, want ErrInvalidOption naming the connection", err)
	}
	if _, err := NewSession(t.Context(), cli); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "connection") {
		t.Errorf("NewSession: %v, want ErrInvalidOption naming the connection", err)
	}
}

// TestKVStubDefaults checks the options a stub falls back on when the
// client hands none: clientv3's own defaults.
func TestKVStubDefaults(t *testing.T) {
	var wait, recv bool
	for _, o := range defaultCallOpts() {
		switch o := o.(type) {
		case grpc.FailFastCallOption:
			wait = !o.FailFast
		case grpc.MaxRecvMsgSizeCallOption:
			recv = o.MaxRecvMsgSize == math.MaxInt32
		}
	}
	if !wait || !recv {
		t.Errorf("defaults %#v: want wait for ready and no receive limit", defaultCallOpts())
	}
}

// TestNamespacedClient checks that a client whose KV or Watcher wraps
// clientv3's own (a namespace) is refused with an error naming it, and a
// client as clientv3.New makes it is not.
func TestNamespacedClient(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}}) // never dialed: nothing is sent
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := checkClient(cli); err != nil {
		t.Fatalf("a plain client: %v", err)
	}
	kv, w := cli.KV, cli.Watcher
	for _, tc := range []struct {
		name, field string
		set         func()
	}{
		{"a namespaced KV", "KV is *namespace.kvPrefix", func() { cli.KV, cli.Watcher = namespace.NewKV(kv, "ns/"), w }},
		{"a namespaced Watcher", "Watcher is *namespace.watcherPrefix", func() { cli.KV, cli.Watcher = kv, namespace.NewWatcher(w, "ns/") }},
		{"a nil KV", "KV is <nil>", func() { cli.KV, cli.Watcher = nil, w }},
	} {
		tc.set()
		if _, err := New(cli, "/e"); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: New: %v, want ErrInvalidOption naming the %s", tc.name, err, tc.field)
		}
		if _, err := NewSession(t.Context(), cli); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: NewSession: %v, want ErrInvalidOption naming the %s", tc.name, err, tc.field)
		}
	}
}
