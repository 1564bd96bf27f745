// Package conns gives the adapters their store connections the way a
// scenario asks for them: one per candidate, through a TCP proxy that can
// be cut (crash failover), counted on the wire (herd, scale), or a shared
// pool of a few (scale: many candidates over few clients, the same pool
// size for every library).
package conns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electkit/election/bench/internal/instrument"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

// Options say how a library connects its candidates.
type Options struct {
	// Proxied puts each candidate's own connection behind its own TCP
	// proxy, so that Cut can make it go dark.
	Proxied bool
	// Counted counts every connection's traffic (instrument).
	Counted bool
	// Pool, when positive, shares Pool connections among all candidates,
	// round robin. Shared connections cannot be cut.
	Pool int
}

// Conn is one candidate's handle on its connection.
type Conn struct {
	Etcd    *clientv3.Client
	ZK      *gozk.Conn
	Counter *instrument.Counter // nil unless counted
	Shared  bool                // a pool connection: Close leaves it open
	proxies []*faultproxy.Proxy
}

// Cut makes the connection go dark both ways and returns the Mono instant
// of the cut.
func (c *Conn) Cut() (int64, error) {
	if len(c.proxies) == 0 {
		return 0, errors.New("conns: this connection has no proxy to cut (the library was not made for crashes)")
	}
	t := mono.Now()
	for _, p := range c.proxies {
		p.Cut()
	}
	return t, nil
}

// Counts returns the connection's counts (zero when not counted).
func (c *Conn) Counts() peer.Counts {
	if c.Counter == nil {
		return peer.Counts{}
	}
	return c.Counter.Counts()
}

// Close closes the proxies first (a cut connection then fails at once
// instead of waiting out its timeouts), then the client, unless shared.
func (c *Conn) Close() {
	for _, p := range c.proxies {
		p.Close()
	}
	if c.Shared {
		return
	}
	if c.Etcd != nil {
		_ = c.Etcd.Close()
	}
	if c.ZK != nil {
		c.ZK.Close()
	}
}

// Dialer hands out connections to one store.
type Dialer struct {
	opts      Options
	endpoints []string // etcd
	servers   []string // zk
	zk        bool

	mu      sync.Mutex // guards pool, next, closed, census
	pool    []*Conn
	next    int
	closed  bool
	census  *Conn // a Plain connection of the dialer's own, for Registered
	tallies map[string]*Tally

	cmu      sync.Mutex // guards counters
	counters []*instrument.Counter
}

// NewEtcd returns a Dialer of etcd clients to endpoints.
func NewEtcd(endpoints []string, o Options) *Dialer {
	return &Dialer{opts: o, endpoints: endpoints}
}

// NewZK returns a Dialer of ZooKeeper connections to servers.
func NewZK(servers []string, o Options) *Dialer {
	return &Dialer{opts: o, servers: servers, zk: true}
}

// Get returns a connection for a new candidate; ttl is the ZooKeeper
// session timeout (pool connections use the first one asked for).
func (d *Dialer) Get(ttl time.Duration) (*Conn, error) {
	if d.opts.Pool > 0 {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.closed {
			return nil, errors.New("conns: dialer closed")
		}
		if len(d.pool) < d.opts.Pool {
			c, err := d.dial(ttl, false)
			if err != nil {
				return nil, err
			}
			c.Shared = true
			d.pool = append(d.pool, c)
		}
		c := d.pool[d.next%len(d.pool)]
		d.next++
		return c, nil
	}
	return d.dial(ttl, d.opts.Proxied)
}

// Fill dials the pool's connections that are not dialed yet (a dialer
// without a pool has none), so that a measurement can begin with its
// clients connected.
func (d *Dialer) Fill(ttl time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("conns: dialer closed")
	}
	for len(d.pool) < d.opts.Pool {
		c, err := d.dial(ttl, false)
		if err != nil {
			return err
		}
		c.Shared = true
		d.pool = append(d.pool, c)
	}
	return nil
}

func (d *Dialer) dial(ttl time.Duration, proxied bool) (*Conn, error) {
	c := &Conn{}
	if d.opts.Counted {
		c.Counter = &instrument.Counter{}
		d.cmu.Lock()
		d.counters = append(d.counters, c.Counter)
		d.cmu.Unlock()
	}
	targets := d.endpoints
	if d.zk {
		targets = d.servers
	}
	addrs := make([]string, len(targets))
	for i, t := range targets {
		addrs[i] = t
		if proxied {
			p, err := faultproxy.Start(strings.TrimPrefix(strings.TrimPrefix(t, "http://"), "https://"))
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("conns: proxy to %s: %w", t, err)
			}
			c.proxies = append(c.proxies, p)
			addrs[i] = p.Addr
			if !d.zk {
				addrs[i] = "http://" + p.Addr
			}
		}
	}
	if d.zk {
		var extra []func(*gozk.Conn)
		if c.Counter != nil {
			extra = append(extra, instrument.ZKDialer(c.Counter))
		}
		zc, err := zktest.Connect(addrs, ttl, extra...)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.ZK = zc
		return c, nil
	}
	cfg := clientv3.Config{Endpoints: addrs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c.Counter != nil {
		cfg.DialOptions = instrument.EtcdDialOptions(c.Counter)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("conns: etcd client for %v: %w", addrs, err)
	}
	c.Etcd = cli
	return c, nil
}

// Plain returns a new connection of its own, neither proxied nor counted
// nor pooled, for the library's own reads (a census); the caller closes it.
func (d *Dialer) Plain(ttl time.Duration) (*Conn, error) {
	dd := &Dialer{endpoints: d.endpoints, servers: d.servers, zk: d.zk}
	return dd.dial(ttl, false)
}

// Counts sums the counts of every connection the dialer made.
func (d *Dialer) Counts() peer.Counts {
	d.cmu.Lock()
	defer d.cmu.Unlock()
	var s peer.Counts
	for _, c := range d.counters {
		s = s.Add(c.Counts())
	}
	return s
}

// Registered counts the candidates registered in the election name
// through a Plain connection the dialer opens on first use and keeps until
// Close: on ZooKeeper by Census, on etcd by a Tally of the election's
// prefix made on the first call for that name.
func (d *Dialer) Registered(ctx context.Context, name string) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.census == nil {
		c, err := d.Plain(10 * time.Second)
		if err != nil {
			return 0, err
		}
		d.census = c
	}
	if d.census.ZK != nil {
		return Census(ctx, d.census, name)
	}
	t := d.tallies[name]
	if t == nil {
		var err error
		if t, err = NewTally(ctx, d.census.Etcd, name+"/"); err != nil {
			return 0, err
		}
		if d.tallies == nil {
			d.tallies = map[string]*Tally{}
		}
		d.tallies[name] = t
	}
	return t.Count()
}

// Close closes the pool and the census connection.
func (d *Dialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, t := range d.tallies {
		t.Close()
	}
	d.tallies = nil
	if d.census != nil {
		d.census.Close()
		d.census = nil
	}
	for _, c := range d.pool {
		c.Shared = false
		c.Close()
	}
	d.pool = nil
	return nil
}

// Census counts the keys under name + "/" (etcd: a count-only range,
// which visits every key under the prefix in the member's index; poll a
// Tally instead) or the children of the
// path name (ZooKeeper) through c.
func Census(ctx context.Context, c *Conn, name string) (int, error) {
	if c.ZK != nil {
		ok, st, err := c.ZK.Exists(name)
		if err != nil || !ok {
			return 0, err
		}
		return int(st.NumChildren), nil
	}
	r, err := c.Etcd.Get(ctx, name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return int(r.Count), nil
}
