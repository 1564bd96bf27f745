package kubesuite_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/kubetest"
)

// leadLog is the one resource both kinds of candidate act on: whoever
// starts leading while another leads is a violation.
type leadLog struct {
	t      *testing.T
	mu     sync.Mutex
	holder string
	led    []string
}

func (g *leadLog) start(who string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holder != "" {
		g.t.Errorf("%s began leading while %s leads", who, g.holder)
	}
	g.holder = who
	g.led = append(g.led, who)
}

func (g *leadLog) stop(who string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holder == who {
		g.holder = ""
	}
}

// clientGoCandidate is a candidate of client-go's leaderelection with a
// LeaseLock on the same Lease, its connection through a proxy.
type clientGoCandidate struct {
	id     string
	px     *faultproxy.Proxy
	led    chan struct{} // closed once it leads
	cancel context.CancelFunc
	done   chan struct{}
	lg     *leadLog
}

// Client-go's timing in these tests: it stops leading RetryPeriod +
// RenewDeadline after its last renewal at the latest, well within the
// LeaseDuration after which the others may take over.
const (
	cgLeaseDuration = 4 * time.Second
	cgRenewDeadline = 2 * time.Second
	cgRetryPeriod   = 500 * time.Millisecond
)

// With release, the candidate releases the Lease when its Run is
// canceled (ReleaseOnCancel). A candidate that is to crash runs without
// it: client-go tells its work to stop only after the release attempt,
// which a cut connection holds up for RenewDeadline, past the lease.
func startClientGo(t *testing.T, name, id string, release bool, lg *leadLog) *clientGoCandidate {
	t.Helper()
	return startClientGoWith(t, name, id, release, lg, cgLeaseDuration, cgRenewDeadline, cgRetryPeriod)
}

// startClientGoTimed starts a client-go candidate without ReleaseOnCancel
// with the given timings.
func startClientGoTimed(t *testing.T, name, id string, lg *leadLog, lease, renew, retry time.Duration) *clientGoCandidate {
	t.Helper()
	return startClientGoWith(t, name, id, false, lg, lease, renew, retry)
}

func startClientGoWith(t *testing.T, name, id string, release bool, lg *leadLog, lease, renew, retry time.Duration) *clientGoCandidate {
	t.Helper()
	cs, px := candidateClient(t, kubetest.AdminToken)
	c := &clientGoCandidate{id: id, px: px, led: make(chan struct{}), done: make(chan struct{}), lg: lg}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: ns},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		ReleaseOnCancel: release, Name: name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { lg.start(id); close(c.led) },
			OnStoppedLeading: func() { lg.stop(id) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		le.Run(ctx)
	}()
	t.Cleanup(c.stepDown)
	return c
}

// stepDown stops c's work, then cancels its Run, which releases the Lease
// (ReleaseOnCancel) and returns.
func (c *clientGoCandidate) stepDown() {
	c.lg.stop(c.id)
	c.cancel()
	<-c.done
}

func (c *clientGoCandidate) waitLed(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-c.led:
	case <-time.After(d):
		t.Fatalf("client-go candidate %s did not lead within %v", c.id, d)
	}
}

// ours is a candidate of this backend on the same Lease.
type ours struct {
	e  *kube.Elector
	px *faultproxy.Proxy
}

func newOurs(t *testing.T, name, id string) ours {
	t.Helper()
	cs, px := candidateClient(t, kubetest.AdminToken)
	e, err := kube.New(cs.CoordinationV1(), ns, name, election.WithID(id), election.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return ours{e, px}
}

type won struct {
	term *election.Term
	err  error
	at   time.Time
}

// campaign campaigns on a goroutine; the Term is logged as leading from
// Campaign's return until it ends.
func (o ours) campaign(lg *leadLog) <-chan won {
	ch := make(chan won, 1)
	go func() {
		t, err := o.e.Campaign(context.Background())
		if err == nil {
			lg.start(o.e.ID())
			context.AfterFunc(t.Context(), func() { lg.stop(o.e.ID()) })
		}
		ch <- won{t, err, time.Now()}
	}()
	return ch
}

func awaitWon(t *testing.T, ch <-chan won, d time.Duration, what string) won {
	t.Helper()
	select {
	case w := <-ch:
		if w.err != nil {
			t.Fatalf("%s: Campaign: %v", what, w.err)
		}
		return w
	case <-time.After(d):
		t.Fatalf("%s: no leadership within %v", what, d)
		return won{}
	}
}

// TestClientGoSideBySide runs client-go's leaderelection candidates and
// ours on one Lease through every kind of handover, both ways: a clean
// release (client-go's ReleaseOnCancel, our Resign), and a crash (the
// leader's connection cut, its lease left to lapse). Nobody begins leading
// while another leads, each side reads the other's holder, our tokens
// increase, and leaseTransitions counts every change of holder as
// client-go counts it.
func TestClientGoSideBySide(t *testing.T) {
	server(t)
	name := leaseName(t)
	lg := &leadLog{t: t}
	ctx := context.Background()

	// client-go leads first; ours waits and takes over on its release.
	cg1 := startClientGo(t, name, "cg1", true, lg)
	cg1.waitLed(t, patience)
	o1 := newOurs(t, name, "o1")
	if l, err := o1.e.Leader(ctx); err != nil || l.ID != "cg1" || l.Token != 0 {
		t.Errorf("Leader while client-go leads = %v, %v; want cg1 with no token", l, err)
	}
	w1 := o1.campaign(lg)
	released := time.Now()
	cg1.stepDown()
	r1 := awaitWon(t, w1, patience, "ours after client-go released")
	t.Logf("client-go release → ours leads: %v", r1.at.Sub(released).Round(time.Millisecond))

	// Ours resigns; a client-go candidate takes over on its next retry.
	cg2 := startClientGo(t, name, "cg2", false, lg)
	lg.stop("o1")
	resigned := time.Now()
	if err := o1.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	cg2.waitLed(t, patience)
	t.Logf("our release → client-go leads: %v", time.Since(resigned).Round(time.Millisecond))
	if l, err := o1.e.Leader(ctx); err != nil || l.ID != "cg2" || l.Token != 0 {
		t.Errorf("Leader after client-go took over = %v, %v; want cg2 with no token", l, err)
	}

	// The client-go leader crashes; ours takes over once its lease lapsed.
	o2 := newOurs(t, name, "o2")
	w2 := o2.campaign(lg)
	crashed := time.Now()
	cg2.px.Cut()
	r2 := awaitWon(t, w2, cgLeaseDuration+patience, "ours after the client-go leader crashed")
	t.Logf("client-go crash → ours leads: %v (lease %v)", r2.at.Sub(crashed).Round(time.Millisecond), cgLeaseDuration)
	if r2.term.Token() <= r1.term.Token() {
		t.Errorf("token %d after %d: not increasing", r2.term.Token(), r1.term.Token())
	}

	// Ours crashes; client-go takes over only after our Term ended.
	cg3 := startClientGo(t, name, "cg3", true, lg)
	crashed = time.Now()
	o2.px.Cut()
	cg3.waitLed(t, ttl+patience)
	t.Logf("our crash → client-go leads: %v (lease %v)", time.Since(crashed).Round(time.Millisecond), ttl)
	if err := r2.term.Err(); err == nil {
		t.Errorf("our crashed Term still valid when client-go leads")
	}

	l, err := admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := *l.Spec.HolderIdentity; h != "cg3" {
		t.Errorf("holderIdentity %q, want cg3", h)
	}
	// cg1 made it (0), then o1, cg2, o2, cg3 took it.
	if n := *l.Spec.LeaseTransitions; n != 4 {
		t.Errorf("leaseTransitions %d, want 4", n)
	}
	if got := fmt.Sprint(lg.led); got != "[cg1 o1 cg2 o2 cg3]" {
		t.Errorf("led in order %s, want [cg1 o1 cg2 o2 cg3]", got)
	}
}
