package etcd

import (
	"context"
	"errors"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The candidacies' watches of a client share one gRPC watch stream, which
// etcd multiplexes: each watch is a small struct in a map, keyed by the ID
// this package gives it, and the stream's one receiving goroutine hands
// each response to its watch. clientv3's Watch keeps a goroutine, two
// channels and a context per watch; a process with thousands of elections
// waiting would hold thousands of each. A waiting candidacy holds no
// goroutine at all (wait.go parks it until its watch has something).
//
// The stream requires a leader (clientv3.WithRequireLeader): a member that
// loses its leader cancels it, and every watch on it breaks. A broken
// watch is the candidacy's to handle: it pauses, reads its keys
// again and watches again, on a new stream opened by the first watch that
// needs one.

// muxes holds each client's watch stream, made at its first watch and
// dropped when the client closes.
var muxes sync.Map // *clientv3.Client → *watchMux

// watchMux is the watch stream of one client, opened again after it broke.
type watchMux struct {
	cli *clientv3.Client

	mu     sync.Mutex
	stream *muxStream // the live stream, or nil
	nextID int64
}

// muxOf returns cli's watch stream.
func muxOf(cli *clientv3.Client) *watchMux {
	if m, ok := muxes.Load(cli); ok {
		return m.(*watchMux)
	}
	m, loaded := muxes.LoadOrStore(cli, &watchMux{cli: cli})
	if !loaded {
		context.AfterFunc(cli.Ctx(), func() { muxes.Delete(cli) })
	}
	return m.(*watchMux)
}

// muxStream is one gRPC watch stream and its watches.
type muxStream struct {
	ws     pb.Watch_WatchClient
	cancel context.CancelFunc
	sendMu sync.Mutex // one Send at a time

	mu      sync.Mutex
	watches map[int64]*muxWatch
	err     error // why it broke; nil while it lasts
}

// muxWatch is one watch on a shared stream. Its responses queue up until
// its owner takes them (take), after ready fires or wake is called.
type muxWatch struct {
	st *muxStream // nil if the stream could not be opened
	id int64

	mu    sync.Mutex
	resps []*pb.WatchResponse
	err   error         // set once the watch broke: the stream broke, or etcd canceled it
	ready chan struct{} // a token is sent when responses or the break arrive; made by the first wait on it (readyC)
	wake  func()        // called once (then cleared) when they arrive: see onReady
}

// watch starts a watch of [key, end) from revision rev on. It never
// blocks for long: a stream that cannot be opened, or a create that
// cannot be sent, gives a watch that is broken already.
func (m *watchMux) watch(key, end string, rev int64) *muxWatch {
	w := &muxWatch{}
	st, err := m.open()
	if err != nil {
		w.broke(err)
		return w
	}
	m.mu.Lock()
	m.nextID++
	w.st, w.id = st, m.nextID
	m.mu.Unlock()
	st.mu.Lock()
	if st.err != nil {
		err := st.err
		st.mu.Unlock()
		w.broke(err)
		return w
	}
	st.watches[w.id] = w
	st.mu.Unlock()
	req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte(key), RangeEnd: []byte(end), StartRevision: rev, WatchId: w.id}}}
	if err := st.send(req); err != nil {
		st.broke(err)
	}
	return w
}

// live reports whether the client's watch stream is open: a watch made
// now goes out at once, with no stream to open (and, with a user name,
// no login) first.
func (m *watchMux) live() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.stream
	if st == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err == nil
}

// open returns the live stream, opening one if there is none.
func (m *watchMux) open() (*muxStream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.stream; st != nil {
		st.mu.Lock()
		live := st.err == nil
		st.mu.Unlock()
		if live {
			return st, nil
		}
		m.stream = nil
	}
	if err := m.cli.Ctx().Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(m.cli.Ctx()))
	ws, err := pb.NewWatchClient(m.cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		cancel()
		return nil, rpctypes.Error(err)
	}
	st := &muxStream{ws: ws, cancel: cancel, watches: map[int64]*muxWatch{}}
	m.stream = st
	go st.recv()
	return st, nil
}

func (st *muxStream) send(req *pb.WatchRequest) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	return st.ws.Send(req)
}

// recv hands each response to its watch until the stream breaks.
func (st *muxStream) recv() {
	for {
		resp, err := st.ws.Recv()
		if err != nil {
			st.broke(rpctypes.Error(err))
			return
		}
		if resp.WatchId == clientv3.InvalidWatchID {
			if resp.Canceled {
				// A create refused: etcd names no watch then (-1), so
				// which one is not known, and the cause may be the
				// stream's own — its auth token, read when it opened,
				// which a member that has not applied it yet calls
				// invalid (permission denied) for every create on it.
				// The stream breaks: every watch on it is opened again,
				// on a new stream with a fresh token.
				st.broke(canceledErr(resp))
				return
			}
			continue
		}
		st.mu.Lock()
		w := st.watches[resp.WatchId]
		if w != nil && resp.Canceled {
			delete(st.watches, resp.WatchId)
		}
		st.mu.Unlock()
		switch {
		case w == nil: // canceled by its owner
		case resp.Canceled:
			w.broke(canceledErr(resp))
		default:
			w.push(resp)
		}
	}
}

// canceledErr is why etcd canceled a watch (as clientv3's WatchResponse.Err).
func canceledErr(resp *pb.WatchResponse) error {
	switch {
	case resp.CompactRevision != 0:
		return rpctypes.ErrCompacted
	case resp.CancelReason != "":
		return rpctypes.Error(status.Error(codes.FailedPrecondition, resp.CancelReason))
	}
	return rpctypes.ErrFutureRev
}

// broke ends the stream with err: every watch on it breaks.
func (st *muxStream) broke(err error) {
	if err == nil {
		err = errors.New("etcd election: the watch stream closed")
	}
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return
	}
	st.err = err
	ws := st.watches
	st.watches = nil
	st.mu.Unlock()
	st.cancel()
	for _, w := range ws {
		w.broke(err)
	}
}

// cancel ends the watch: its owner no longer reads it.
func (w *muxWatch) cancel() {
	st := w.st
	if st == nil {
		return
	}
	st.mu.Lock()
	_, live := st.watches[w.id]
	delete(st.watches, w.id)
	ok := live && st.err == nil
	st.mu.Unlock()
	if ok {
		req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: w.id}}}
		if err := st.send(req); err != nil {
			st.broke(err)
		}
	}
}

func (w *muxWatch) push(resp *pb.WatchResponse) {
	w.mu.Lock()
	w.resps = append(w.resps, resp)
	wake := w.signal()
	w.mu.Unlock()
	if wake != nil {
		wake()
	}
}

func (w *muxWatch) broke(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	wake := w.signal()
	w.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// signal notes that something arrived; w.mu is held. It returns the wake
// callback to call, if one was set.
func (w *muxWatch) signal() func() {
	if w.ready != nil {
		select {
		case w.ready <- struct{}{}:
		default:
		}
	}
	wake := w.wake
	w.wake = nil
	return wake
}

// readyC returns the channel that receives a token when responses or the
// break arrive (one is there already if some have). A parked waiter never
// makes it: its wake callback (onReady) does instead.
func (w *muxWatch) readyC() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ready == nil {
		w.ready = make(chan struct{}, 1)
		if len(w.resps) > 0 || w.err != nil {
			w.ready <- struct{}{}
		}
	}
	return w.ready
}

// take returns the responses that arrived since the last take, and the
// error the watch broke with (after them), or nil.
func (w *muxWatch) take() ([]*pb.WatchResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ready != nil {
		select {
		case <-w.ready:
		default:
		}
	}
	resps := w.resps
	w.resps = nil
	return resps, w.err
}

// onReady makes wake be called once, from the stream's goroutine, when
// responses or the break arrive. It returns false, and sets nothing, if
// some have already arrived: take them now.
func (w *muxWatch) onReady(wake func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.resps) > 0 || w.err != nil {
		return false
	}
	w.wake = wake
	return true
}

// noWake clears a callback set by onReady that has not been called.
func (w *muxWatch) noWake() {
	w.mu.Lock()
	w.wake = nil
	w.mu.Unlock()
}
