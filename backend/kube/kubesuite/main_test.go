package kubesuite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/electiontest"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/kubetest"
)

// ttl is the tests' TTL: the Lease's leaseDurationSeconds.
const ttl = 2 * time.Second

const patience = 15 * time.Second

// ns is the namespace of the tests' Leases.
const ns = "default"

// srv is the API server every test of the binary shares; each test's
// Leases have names of their own.
var (
	srv    *kubetest.Server
	srvErr error
	admin  *kubernetes.Clientset
)

// ignore lists goroutines of client-go's that outlive a test: the HTTP/2
// connections of its shared transports, closed when idle.
var ignore = []goleak.Option{
	goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*clientConnReadLoop).run"),
	goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntilWithContext.func1"),
	goleak.IgnoreAnyFunction("github.com/electkit/election/internal/rig/faultproxy.(*Proxy).pipe"),
	goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/embed"),
}

// TestMain starts the API server once for every test, and fails the
// binary if a goroutine outlives the tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubesuite-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start := time.Now()
	srv, srvErr = kubetest.Start(dir)
	if srvErr == nil {
		fmt.Fprintf(os.Stderr, "kubesuite: kube-apiserver ready at %s in %v\n", srv.Addr, time.Since(start).Round(time.Millisecond))
		admin, srvErr = kubetest.Client(srv.Addr, kubetest.AdminToken)
	}
	code := m.Run()
	if srv != nil {
		srv.Close()
	}
	os.RemoveAll(dir)
	if electBin != "" {
		os.RemoveAll(filepath.Dir(electBin))
	}
	if code == 0 {
		if err := goleak.Find(ignore...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// server returns the shared API server, or fails t (skips it outside CI)
// if it could not start.
func server(t testing.TB) *kubetest.Server {
	t.Helper()
	if srvErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the kube-apiserver did not start (CI is set: real-server tests must run): %v", srvErr)
		}
		t.Skipf("the kube-apiserver did not start: %v", srvErr)
	}
	return srv
}

var leaseSeq atomic.Int64

// leaseName returns a Lease name of t's own: a DNS subdomain.
func leaseName(t testing.TB) string {
	var b strings.Builder
	for _, c := range strings.ToLower(t.Name()) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 50 {
		s = s[len(s)-50:]
	}
	return fmt.Sprintf("t%d-%s", leaseSeq.Add(1), strings.Trim(s, "-"))
}

// candidateClient returns a clientset whose connections go through a
// proxy of their own, for faults, closed in t's cleanup.
func candidateClient(t testing.TB, token string) (*kubernetes.Clientset, *faultproxy.Proxy) {
	t.Helper()
	s := server(t)
	px := faultproxy.New(t, s.Addr)
	cs, err := kubetest.Client(px.Addr, token)
	if err != nil {
		t.Fatal(err)
	}
	return cs, px
}

// kubeElection is one election of the conformance suite: one Lease, each
// candidate with its own client through its own proxy, so that Crash can
// cut it off silently and let its lease lapse, as a dead process's would.
type kubeElection struct {
	name string
	mu   sync.Mutex
	px   map[election.Elector]*faultproxy.Proxy
}

func (k *kubeElection) Candidate(t *testing.T, opts ...election.Option) election.Elector {
	t.Helper()
	cs, px := candidateClient(t, kubetest.AdminToken)
	e, err := kube.New(cs.CoordinationV1(), ns, k.name, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	k.px[e] = px
	k.mu.Unlock()
	return e
}

func (k *kubeElection) proxy(e election.Elector) *faultproxy.Proxy {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.px[e]
}

func (k *kubeElection) Crash(t *testing.T, e election.Elector) { k.proxy(e).Cut() }

// Silence drops the server's replies to e: requests arrive and are carried
// out, no answer comes back.
func (k *kubeElection) Silence(t *testing.T, e election.Elector) func() {
	px := k.proxy(e)
	px.CutReplies()
	return func() {
		px.Heal()
		px.Reset() // a stream that lost bytes never parses again: reconnect
	}
}

// Evict deletes the Lease, as kubectl delete lease does.
func (k *kubeElection) Evict(t *testing.T, e election.Elector, term *election.Term) {
	if err := admin.CoordinationV1().Leases(ns).Delete(context.Background(), k.name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Evict: deleting Lease %s/%s: %v", ns, k.name, err)
	}
}

func TestConformance(t *testing.T) {
	server(t)
	electiontest.Run(t, electiontest.Harness{
		NewElection: func(t *testing.T) electiontest.Election {
			return &kubeElection{name: leaseName(t), px: map[election.Elector]*faultproxy.Proxy{}}
		},
		// The waiter takes over leaseDurationSeconds after it saw the
		// last renewal, then one update and its watch event.
		Failover:         ttl + 1500*time.Millisecond,
		Patience:         patience,
		Handover:         2 * time.Second,
		Handovers:        30,
		IgnoreGoroutines: ignore,
	})
}

// TestHoldsThroughClockJumps: the wall clock steps by hours while a
// candidate leads; its Term holds, nobody else is elected, Resign hands
// over (P3 under clock steps).
func TestHoldsThroughClockJumps(t *testing.T) {
	server(t)
	name := leaseName(t)
	electiontest.HoldsThroughClockJumps(t, ttl, patience, func(t *testing.T, opts ...election.Option) election.Elector {
		cs, _ := candidateClient(t, kubetest.AdminToken)
		e, err := kube.New(cs.CoordinationV1(), ns, name, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	})
}
