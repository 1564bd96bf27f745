package main

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// errCrashed is what a crashed candidate's dialer answers.
var errCrashed = errors.New("crashed: this candidate's process is down")

// demoLink dials a candidate's connections to the store and can cut them:
// the open ones close and new ones fail, as if the candidate's process had
// died. Nothing is said to the store: its session or lease runs out there.
type demoLink struct {
	dead atomic.Bool
	mu   sync.Mutex
	nc   []net.Conn
}

// dial is the dialer of go-zookeeper's WithDialer.
func (l *demoLink) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.dialContext(ctx, network, addr)
}

// dialGRPC is the dialer of grpc.WithContextDialer: TCP to addr.
func (l *demoLink) dialGRPC(ctx context.Context, addr string) (net.Conn, error) {
	return l.dialContext(ctx, "tcp", addr)
}

func (l *demoLink) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if l.dead.Load() {
		return nil, errCrashed
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead.Load() { // cut while dialing
		c.Close()
		return nil, errCrashed
	}
	l.nc = append(l.nc, c)
	return c, nil
}

// cut closes every connection dialed so far and fails every later dial.
func (l *demoLink) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead.Store(true)
	for _, c := range l.nc {
		c.Close()
	}
	l.nc = nil
}
