// Package instrument counts what election clients send to and receive from
// the store, on the wire: gRPC interceptors on an etcd client, and a
// net.Conn wrapper that reads ZooKeeper's packet framing. The counts are
// peer.Counts: requests (not renewals), watch events delivered, renewals.
package instrument

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/electkit/election/bench/internal/peer"
)

// Counter accumulates the counts of one client or connection. The zero
// value is ready; it is safe for concurrent use.
type Counter struct {
	requests, events, renewals atomic.Int64
}

// Counts returns the counts so far.
func (c *Counter) Counts() peer.Counts {
	return peer.Counts{Requests: c.requests.Load(), Events: c.events.Load(), Renewals: c.renewals.Load()}
}

// EtcdDialOptions returns gRPC dial options for clientv3.Config.DialOptions
// that count into c: every unary call is a request; on the watch stream
// every message sent (create, cancel, progress) is a request and every
// event received is an event; on the lease keepalive stream every message
// sent is a renewal.
func EtcdDialOptions(c *Counter) []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Lease/LeaseKeepAlive" {
			c.renewals.Add(1)
		} else {
			c.requests.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return s, err
		}
		return &countedStream{ClientStream: s, c: c, method: method}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

type countedStream struct {
	grpc.ClientStream
	c      *Counter
	method string
}

func (s *countedStream) SendMsg(m any) error {
	switch s.method {
	case "/etcdserverpb.Lease/LeaseKeepAlive":
		s.c.renewals.Add(1)
	default:
		s.c.requests.Add(1)
	}
	return s.ClientStream.SendMsg(m)
}

func (s *countedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		if wr, ok := m.(*pb.WatchResponse); ok && len(wr.Events) > 0 {
			s.c.events.Add(int64(len(wr.Events)))
		}
	}
	return err
}

// ZKDialer returns a go-zookeeper connection option whose dialer counts
// into c: each packet the client sends after the connect request is a
// request, or a renewal when it is a ping (xid −2); each packet the server
// sends with xid −1 is a watch event.
func ZKDialer(c *Counter) func(*gozk.Conn) {
	return gozk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		zc := &zkConn{Conn: conn}
		zc.out.on = func(xid int32) {
			if xid == -2 {
				c.renewals.Add(1)
			} else {
				c.requests.Add(1)
			}
		}
		zc.in.on = func(xid int32) {
			if xid == -1 {
				c.events.Add(1)
			}
		}
		return zc, nil
	})
}

type zkConn struct {
	net.Conn
	inMu, outMu sync.Mutex
	in, out     framer
}

func (z *zkConn) Read(p []byte) (int, error) {
	n, err := z.Conn.Read(p)
	z.inMu.Lock()
	z.in.feed(p[:n])
	z.inMu.Unlock()
	return n, err
}

func (z *zkConn) Write(p []byte) (int, error) {
	n, err := z.Conn.Write(p)
	z.outMu.Lock()
	z.out.feed(p[:n])
	z.outMu.Unlock()
	return n, err
}

// framer splits a ZooKeeper byte stream into length-prefixed packets and
// calls on with each packet's xid (its first four bytes), except for the
// first packet of the connection (the connect request or response, which
// has no xid).
type framer struct {
	on     func(xid int32)
	lenBuf [4]byte
	lenN   int
	remain int // body bytes still to come of the current packet
	head   [4]byte
	headN  int
	frames int
}

func (f *framer) feed(p []byte) {
	for len(p) > 0 {
		if f.remain == 0 {
			k := copy(f.lenBuf[f.lenN:], p)
			f.lenN += k
			p = p[k:]
			if f.lenN < 4 {
				return
			}
			f.lenN, f.headN = 0, 0
			f.remain = int(binary.BigEndian.Uint32(f.lenBuf[:]))
			if f.remain <= 0 {
				f.remain = 0
				f.done()
			}
			continue
		}
		take := min(len(p), f.remain)
		if f.headN < 4 {
			f.headN += copy(f.head[f.headN:], p[:take])
		}
		f.remain -= take
		p = p[take:]
		if f.remain == 0 {
			f.done()
		}
	}
}

func (f *framer) done() {
	f.frames++
	if f.frames > 1 && f.headN == 4 && f.on != nil {
		f.on(int32(binary.BigEndian.Uint32(f.head[:])))
	}
}
