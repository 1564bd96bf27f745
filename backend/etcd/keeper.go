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

	mu      sync.Mutex
	cur     *keepStream // nil until the next renewal opens one
	opening *keepOpen   // the opening of the next stream, while it runs
}

// keepOpen is the opening of a stream, which every renewal that comes
// while it runs waits for.
type keepOpen struct {
	done chan struct{} // closed when it has ended
	ks   *keepStream   // the stream opened, or nil
	err  error         // why it failed
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
//
// The opening is not bounded by the ctx of the renewal that began it: with
// a user name, it is a login, which checks the password's bcrypt hash on
// the member, and on a loaded member that takes longer than a renewal may
// wait. A renewal whose ctx ends first fails, as any renewal without a
// reply in time; the opening goes on, and the renewals after it wait for
// the same one and then use its stream. Aborted with each renewal, no
// login would ever finish, no renewal would be sent — not even the one
// etcd would refuse with permission denied, which ends the session — and
// each abandoned login would still cost the member a hash.
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

// stream returns the working stream, opening one if there is none. It
// waits for the opening until ctx ends, which does not stop the opening
// (see openTimeout).
func (k *keeper) stream(ctx context.Context) (*keepStream, error) {
	k.mu.Lock()
	if ks := k.cur; ks != nil {
		ks.mu.Lock()
		broken := ks.err != nil
		ks.mu.Unlock()
		if !broken {
			k.mu.Unlock()
			return ks, nil
		}
		k.cur = nil
	}
	if err := k.cli.Ctx().Err(); err != nil {
		k.mu.Unlock()
		return nil, err
	}
	op := k.opening
	if op == nil {
		op = &keepOpen{done: make(chan struct{})}
		k.opening = op
		go k.open(op)
	}
	k.mu.Unlock()
	select {
	case <-op.done:
		return op.ks, op.err
	case <-ctx.Done():
		return nil, fmt.Errorf("opening the lease renewal stream (with a user name, a login first) took longer than the renewal could wait; it goes on for the next renewal: %w", ctx.Err())
	}
}

// open opens a stream for op, within openTimeout, and makes it the working
// stream.
func (k *keeper) open(op *keepOpen) {
	defer close(op.done)
	// The stream lives with the client; openTimeout may cancel it only
	// until it is open.
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(k.cli.Ctx()))
	var openMu sync.Mutex
	open, late := true, false
	timer := time.AfterFunc(openTimeout, func() {
		openMu.Lock()
		if open {
			late = true
			cancel()
		}
		openMu.Unlock()
	})
	stream, err := pb.NewLeaseClient(k.cli.ActiveConnection()).LeaseKeepAlive(sctx)
	openMu.Lock()
	open = false
	openMu.Unlock()
	timer.Stop()
	if err == nil && sctx.Err() != nil {
		err = sctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.opening = nil
	if err != nil {
		cancel()
		op.err = rpctypes.Error(err)
		if late {
			op.err = fmt.Errorf("opening the lease renewal stream took over %v: %w", openTimeout, op.err)
		}
		return
	}
	op.ks = &keepStream{k: k, stream: stream, cancel: cancel}
	k.cur = op.ks
	go op.ks.recv()
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

// fail breaks the stream: every request waiting on it fails, and the next
// renewal opens another. The first fails with err: etcd answers a stream's
// requests in order, so an error the member ends the stream with (a lease
// refused with permission denied, say) is the first one's. The others fail
// with a plain error that names err without being it: their leases were
// not refused, and their renewals go on on the next stream.
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
	for i, r := range pending {
		r.err = err
		if i > 0 {
			r.err = fmt.Errorf("the lease renewal stream broke before this renewal was answered (%v); the next renewal opens another", err)
		}
		close(r.done)
	}
	ks.k.mu.Lock()
	if ks.k.cur == ks {
		ks.k.cur = nil
	}
	ks.k.mu.Unlock()
}
