package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A keeper sends the lease renewals of every Session of one client on one
// LeaseKeepAlive stream, as clientv3's own KeepAlive does, instead of a
// stream per renewal (KeepAliveOnce): a stream costs a round of HTTP/2
// stream setup on both sides and, with a user name and password, a login
// (clientv3 logs in for every stream it opens). Each renewal is still a
// request of its own, timed from its own send: etcd answers a stream's
// requests one at a time, in order (its keepalive handler renews, replies
// and reads the next), so the n-th reply answers the n-th request, and a
// renewal counts from the send time of the request it answers, never a
// later one.
//
// A renewal that gets no reply before its ctx ends breaks the stream
// (every request still waiting on it fails, and is retried as any failed
// renewal is): the member behind it is stuck or cut off, and the next
// renewal opens a new stream, which may reach another member.
type keeper struct {
	cli *clientv3.Client

	mu  sync.Mutex
	cur *keepStream // nil until the next renewal opens one
}

// keepStream is one LeaseKeepAlive stream and the requests sent on it.
type keepStream struct {
	k      *keeper
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc

	sendMu sync.Mutex // held across a send, so that pending is in the order sent

	mu      sync.Mutex     // never held across a send: the replies keep flowing
	pending []*keepRequest // sent and not yet answered, in the order sent
	err     error          // why the stream broke; nil while it works
}

// keepRequest is one renewal sent on a stream.
type keepRequest struct {
	id   int64
	ttl  int64
	err  error
	done chan struct{}
}

// keepers holds the keeper of each client, made at its first renewal and
// dropped when the client closes.
var keepers sync.Map // *clientv3.Client → *keeper

// keeperOf returns cli's keeper.
func keeperOf(cli *clientv3.Client) *keeper {
	if k, ok := keepers.Load(cli); ok {
		return k.(*keeper)
	}
	k, loaded := keepers.LoadOrStore(cli, &keeper{cli: cli})
	if !loaded {
		context.AfterFunc(cli.Ctx(), func() { keepers.Delete(cli) })
	}
	return k.(*keeper)
}

// openTimeout bounds the opening of a stream: with auth, clientv3 logs in
// first, and retries that for as long as the stream's context lasts.
const openTimeout = 5 * time.Second

// keepAlive renews lease id once and returns the TTL etcd reports: 0 when
// it no longer knows the lease (ErrLeaseNotFound then).
func (k *keeper) keepAlive(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	ks, err := k.stream(ctx)
	if err != nil {
		return 0, err
	}
	r := &keepRequest{id: int64(id), done: make(chan struct{})}
	if err := ks.send(r); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		ks.fail(fmt.Errorf("a lease renewal got no reply within its time: %w", ctx.Err()))
		<-r.done
	}
	if r.err != nil {
		return 0, r.err
	}
	if r.ttl <= 0 {
		return 0, rpctypes.ErrLeaseNotFound
	}
	return r.ttl, nil
}

// stream returns the working stream, opening one if there is none.
func (k *keeper) stream(ctx context.Context) (*keepStream, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ks := k.cur; ks != nil {
		ks.mu.Lock()
		broken := ks.err != nil
		ks.mu.Unlock()
		if !broken {
			return ks, nil
		}
		k.cur = nil
	}
	if err := k.cli.Ctx().Err(); err != nil {
		return nil, err
	}
	// The stream lives with the client; its opening is bounded by ctx and
	// openTimeout, which may cancel it only until it is open.
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(k.cli.Ctx()))
	var openMu sync.Mutex
	open := true
	abort := func() {
		openMu.Lock()
		if open {
			cancel()
		}
		openMu.Unlock()
	}
	stopAbort := context.AfterFunc(ctx, abort)
	timer := time.AfterFunc(openTimeout, abort)
	stream, err := pb.NewLeaseClient(k.cli.ActiveConnection()).LeaseKeepAlive(sctx)
	openMu.Lock()
	open = false
	openMu.Unlock()
	stopAbort()
	timer.Stop()
	if err == nil && sctx.Err() != nil {
		err = sctx.Err()
	}
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, rpctypes.Error(err)
	}
	ks := &keepStream{k: k, stream: stream, cancel: cancel}
	k.cur = ks
	go ks.recv()
	return ks, nil
}

// send sends r on the stream; if that fails, r fails with the stream.
func (ks *keepStream) send(r *keepRequest) error {
	ks.sendMu.Lock()
	defer ks.sendMu.Unlock()
	ks.mu.Lock()
	if ks.err != nil {
		err := ks.err
		ks.mu.Unlock()
		return err
	}
	ks.pending = append(ks.pending, r)
	ks.mu.Unlock()
	if err := ks.stream.Send(&pb.LeaseKeepAliveRequest{ID: r.id}); err != nil {
		ks.fail(rpctypes.Error(err))
	}
	return nil
}

// recv hands each reply to the request it answers, until the stream
// breaks.
func (ks *keepStream) recv() {
	for {
		resp, err := ks.stream.Recv()
		if err != nil {
			ks.fail(rpctypes.Error(err))
			return
		}
		ks.mu.Lock()
		if len(ks.pending) == 0 || ks.pending[0].id != resp.ID {
			ks.mu.Unlock()
			ks.fail(fmt.Errorf("a lease renewal's reply for lease %016x does not answer the first request waiting", uint64(resp.ID)))
			return
		}
		r := ks.pending[0]
		ks.pending[0] = nil
		ks.pending = ks.pending[1:]
		ks.mu.Unlock()
		r.ttl = resp.TTL
		close(r.done)
	}
}

// fail breaks the stream: every request waiting on it fails with err, and
// the next renewal opens another.
func (ks *keepStream) fail(err error) {
	if err == nil {
		err = errors.New("the lease renewal stream ended")
	}
	ks.mu.Lock()
	if ks.err != nil {
		ks.mu.Unlock()
		return
	}
	ks.err = err
	pending := ks.pending
	ks.pending = nil
	ks.mu.Unlock()
	ks.cancel()
	for _, r := range pending {
		r.err = err
		close(r.done)
	}
	ks.k.mu.Lock()
	if ks.k.cur == ks {
		ks.k.cur = nil
	}
	ks.k.mu.Unlock()
}
