package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"

	"github.com/electkit/election/internal/rig/embedetcd"
)

const (
	// proxyAttempts is how many free ports a proxy tries before giving up.
	proxyAttempts = 5
	// proxyReadyTimeout bounds the wait for one proxy to listen.
	proxyReadyTimeout = 5 * time.Second
	// proxyCloseGrace is how long Cleanup lets proxies close before stopping
	// the members: a proxy's Close waits for its open connections, which end
	// at the latest when the member behind it stops.
	proxyCloseGrace = time.Second
)

// errProxyNotReady is returned when a proxy neither listens nor fails in
// time.
var errProxyNotReady = errors.New("proxy not ready in time")

// Cluster is an etcd cluster in which clients reach every member through its
// own TCP proxy, so tests can cut, slow down or pause a member's client
// traffic. Peer traffic between members does not go through the proxies.
type Cluster struct {
	etcd    *embedetcd.Cluster
	members []*Member
	drains  sync.WaitGroup // goroutines draining the proxies' error channels
}

// Member is one cluster member together with the proxy in front of it.
type Member struct {
	// Member is the etcd member: Name, ClientURL, Stop, Restart, IsLeader...
	*embedetcd.Member
	// Proxy forwards Endpoint to the member's client URL. Tx is the
	// client-to-member direction, Rx member-to-client.
	Proxy proxy.Server
	// Endpoint is the proxy's address for clients, such as
	// "http://127.0.0.1:40123" ("https://..." when the cluster uses TLS).
	Endpoint string
}

// NewCluster starts an n-member etcd cluster with cfg and puts a TCP proxy
// (go.etcd.io/etcd/pkg/v3/proxy) in front of each member's client URL. tb
// fails if anything does not start. Cleanup closes the proxies, then the
// members.
//
// A proxy listens on its port on all interfaces (the proxy package gives no
// choice); Endpoint always names it through 127.0.0.1.
func NewCluster(tb TB, n int, cfg embedetcd.Config) *Cluster {
	tb.Helper()
	ec, err := embedetcd.StartCluster(n, cfg)
	if err != nil {
		tb.Fatalf("etcdtest: starting %d-member etcd cluster: %v", n, err)
		return nil
	}
	c := &Cluster{etcd: ec}
	tb.Cleanup(func() {
		if err := c.close(); err != nil {
			tb.Fatalf("etcdtest: closing cluster: %v", err)
		}
	})
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	for _, em := range ec.Members() {
		p, endpoint, err := c.startProxy(em.ClientURL, lg)
		if err != nil {
			tb.Fatalf("etcdtest: starting proxy for member %s: %v", em.Name, err)
			return nil
		}
		c.members = append(c.members, &Member{Member: em, Proxy: p, Endpoint: endpoint})
	}
	return c
}

// startProxy starts a proxy from a free 127.0.0.1 port to the member client
// URL to, trying a few ports in case another process takes one first.
func (c *Cluster) startProxy(to string, lg *zap.Logger) (proxy.Server, string, error) {
	target, err := url.Parse(to)
	if err != nil {
		return nil, "", fmt.Errorf("member URL %q: %w", to, err)
	}
	var errs []error
	for range proxyAttempts {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		from := url.URL{Scheme: "tcp", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		p := proxy.NewServer(proxy.ServerConfig{
			Logger: lg,
			From:   from,
			To:     url.URL{Scheme: "tcp", Host: target.Host},
		})
		timer := time.NewTimer(proxyReadyTimeout)
		select {
		case <-p.Ready():
			timer.Stop()
			c.drainErrors(p, lg)
			return p, target.Scheme + "://" + from.Host, nil
		case <-p.Done():
			// NewServer failed to listen; it reported why on Error().
			timer.Stop()
			select {
			case err := <-p.Error():
				errs = append(errs, err)
			default:
				errs = append(errs, fmt.Errorf("proxy on port %d closed before listening", port))
			}
		case <-timer.C:
			p.Close()
			return nil, "", fmt.Errorf("proxy on port %d: %w", port, errProxyNotReady)
		}
	}
	return nil, "", fmt.Errorf("no free port after %d attempts: %w", proxyAttempts, errors.Join(errs...))
}

// drainErrors consumes p's error channel until p is closed. The proxy sends
// every accept, dial and copy error there, and once its small buffer is full
// it stops forwarding until someone reads.
func (c *Cluster) drainErrors(p proxy.Server, lg *zap.Logger) {
	c.drains.Add(1)
	go func() {
		defer c.drains.Done()
		for {
			select {
			case <-p.Done():
				return
			case err := <-p.Error():
				lg.Debug("proxy error", zap.String("from", p.From()), zap.Error(err))
			}
		}
	}()
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// close closes the proxies, then the members. A proxy's Close waits until its
// open connections end, so proxies get proxyCloseGrace to close on their own
// before the members stop, which ends any connections still open.
func (c *Cluster) close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.members))
	for i, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Proxy.Close(); err != nil {
				errs[i] = fmt.Errorf("closing proxy of member %s: %w", m.Name, err)
			}
		}()
	}
	closed := make(chan struct{})
	go func() {
		wg.Wait()
		close(closed)
	}()
	timer := time.NewTimer(proxyCloseGrace)
	select {
	case <-closed:
	case <-timer.C:
	}
	timer.Stop()
	err := c.etcd.Close()
	<-closed
	c.drains.Wait()
	return errors.Join(append(errs, err)...)
}

// Members returns the members, in start order.
func (c *Cluster) Members() []*Member {
	return append([]*Member(nil), c.members...)
}

// Endpoints returns every member's proxy endpoint, for
// clientv3.Config.Endpoints.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.Endpoint
	}
	return eps
}

// Etcd returns the underlying cluster, whose members clients reach directly
// rather than through the proxies.
func (c *Cluster) Etcd() *embedetcd.Cluster { return c.etcd }

// settledLeader returns the index of a running member that is the raft leader
// and that every other running member names as leader, or -1.
func (c *Cluster) settledLeader() int {
	for i, m := range c.members {
		if !m.IsLeader() {
			continue
		}
		for _, o := range c.members {
			if o.Running() && o.Lead() != m.ID() {
				return -1
			}
		}
		return i
	}
	return -1
}

// leaderViews describes which leader each member sees, for failure messages.
func (c *Cluster) leaderViews() string {
	views := make([]string, len(c.members))
	for i, m := range c.members {
		switch {
		case !m.Running():
			views[i] = m.Name + ": stopped"
		case m.Lead() == 0:
			views[i] = m.Name + ": none"
		default:
			views[i] = fmt.Sprintf("%s: %x", m.Name, m.Lead())
		}
	}
	return strings.Join(views, ", ")
}

// Blackhole drops all client traffic through the member's proxy, in both
// directions, while keeping connections open.
func (m *Member) Blackhole() {
	m.Proxy.BlackholeTx()
	m.Proxy.BlackholeRx()
}

// Unblackhole lets client traffic through the member's proxy again.
func (m *Member) Unblackhole() {
	m.Proxy.UnblackholeTx()
	m.Proxy.UnblackholeRx()
}
