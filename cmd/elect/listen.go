package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/electkit/election"
	"github.com/electkit/election/electionhttp"
	"github.com/electkit/election/metrics"
)

// checkListen checks --listen: host:port, port a number (0 picks one).
func checkListen(f *flagSet, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return f.Bad("listen", "must be HOST:PORT, e.g. 127.0.0.1:9090 or :9090 (%v)", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return f.Bad("listen", "port %q must be a number from 0 to 65535", port)
	}
	return nil
}

// opsServer serves elect run's operations endpoints on --listen while it
// runs: /metrics (the metrics package's collector of the election, in the
// Prometheus text format), /healthz (electionhttp's Health: 503 when this
// process believes it leads but its Term's deadline is near or past
// without a renewal), /readyz (ready only while leading), /readyz/any
// (ready while the election is followed) and /leader (the leader as
// JSON).
type opsServer struct {
	ln  net.Listener
	srv *http.Server
	m   *metrics.Collector
	mux *http.ServeMux

	mu sync.Mutex
	tr *electionhttp.Tracker // set by attach
}

// listenOps listens on addr and starts serving; the election endpoints
// answer 503 until attach.
func listenOps(addr, name string) (*opsServer, error) {
	m, err := metrics.New(name)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	o := &opsServer{ln: ln, m: m, mux: http.NewServeMux()}
	o.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	o.mux.Handle("/healthz", o.handler(func(tr *electionhttp.Tracker) http.Handler { return tr.Health() }))
	o.mux.Handle("/readyz", o.handler(func(tr *electionhttp.Tracker) http.Handler { return tr.ReadyLeader() }))
	o.mux.Handle("/readyz/any", o.handler(func(tr *electionhttp.Tracker) http.Handler { return tr.ReadyAny() }))
	o.mux.Handle("/leader", o.handler(func(tr *electionhttp.Tracker) http.Handler { return tr.LeaderJSON() }))
	o.srv = &http.Server{Handler: o.mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = o.srv.Serve(ln) }()
	return o, nil
}

// Addr is the address the server listens on.
func (o *opsServer) Addr() string { return o.ln.Addr().String() }

// handler serves through the Tracker's handler once attach has run.
func (o *opsServer) handler(h func(*electionhttp.Tracker) http.Handler) http.Handler {
	var once sync.Once
	var inner http.Handler
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		tr := o.tr
		o.mu.Unlock()
		if tr == nil {
			http.Error(w, "elect run: not connected to the election yet", http.StatusServiceUnavailable)
			return
		}
		once.Do(func() { inner = h(tr) })
		inner.ServeHTTP(w, r)
	})
}

// attach follows e for the health and leader endpoints.
func (o *opsServer) attach(e election.Elector) error {
	tr, err := electionhttp.New(e)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.tr = tr
	o.mu.Unlock()
	return nil
}

// callbacks wraps cb for the Tracker. (Run reports its campaigns to the
// metrics through the Elector's Events.)
func (o *opsServer) callbacks(cb election.Callbacks) election.Callbacks {
	o.mu.Lock()
	tr := o.tr
	o.mu.Unlock()
	if tr != nil {
		cb = tr.Callbacks(cb)
	}
	return cb
}

// close stops the server (within a second) and the Tracker.
func (o *opsServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := o.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = o.srv.Close()
	}
	o.mu.Lock()
	tr := o.tr
	o.mu.Unlock()
	if tr != nil {
		err = errors.Join(err, tr.Close())
	}
	return err
}
