package kubesuite_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/internal/rig/kubetest"
)

// counter counts the requests a clientset sends.
type counter struct {
	n  atomic.Int64
	rt http.RoundTripper
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

func countingClient(t *testing.T) (*kubernetes.Clientset, *counter) {
	t.Helper()
	c := &counter{}
	cfg := kubetest.Config(server(t).Addr, kubetest.AdminToken)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { c.rt = rt; return c }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, c
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// TestFigures measures this backend beside client-go's leaderelection at
// default settings (client-go: LeaseDuration 15 s, RenewDeadline 10 s,
// RetryPeriod 2 s, ReleaseOnCancel; ours: TTL 15 s): the handover after a
// clean release, and the requests an idle waiting candidate sends. It
// takes about a minute, so it runs only with KUBESUITE_FIGURES=1.
func TestFigures(t *testing.T) {
	if os.Getenv("KUBESUITE_FIGURES") == "" {
		t.Skip("set KUBESUITE_FIGURES=1 to measure")
	}
	server(t)
	const rounds = 20
	ctx := context.Background()

	// Ours: a leader resigns, the waiter leads; measured from Resign's
	// call to the waiter's Campaign returning.
	name := leaseName(t)
	a, b := newOursOpts(t, name, kubetest.AdminToken, election.WithTTL(15*time.Second)), newOursOpts(t, name, kubetest.AdminToken, election.WithTTL(15*time.Second))
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	var ours []time.Duration
	lead, wait := a, b
	for range rounds {
		ch := make(chan error, 1)
		go func() { _, err := wait.Campaign(ctx); ch <- err }()
		waitQueued(t, wait)
		start := time.Now()
		if err := lead.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		ours = append(ours, time.Since(start))
		lead, wait = wait, lead
	}

	// client-go: the leader's Run is canceled (ReleaseOnCancel); measured
	// from the cancel to the waiter's OnStartedLeading.
	cname := leaseName(t)
	var theirs []time.Duration
	started := make(chan time.Time, 2)
	run := func(id string) (context.CancelFunc, chan struct{}, *counter) {
		cs, n := countingClient(t)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: cname, Namespace: ns}, Client: cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: id}},
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { started <- time.Now() }, OnStoppedLeading: func() {}},
		})
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); le.Run(cctx) }()
		return cancel, done, n
	}
	cancelA, doneA, _ := run("cga")
	<-started
	cancelB, doneB, polls := run("cgb")
	for i := range rounds {
		// The release follows the waiter's poll: the next comes a
		// jittered RetryPeriod later (2-4.4 s), the worst phase.
		waitCount(t, polls, 1)
		start := time.Now()
		cancelA()
		<-doneA
		select {
		case at := <-started:
			theirs = append(theirs, at.Sub(start))
		case <-time.After(30 * time.Second):
			t.Fatal("client-go waiter did not take over")
		}
		cancelA, doneA = cancelB, doneB
		cancelB, doneB, polls = run("cg" + string(rune('c'+i)))
	}
	cancelA()
	cancelB()
	<-doneA
	<-doneB
	t.Logf("handover after a clean release, %d rounds: ours p50 %v p99 %v; client-go (ReleaseOnCancel, released just after the waiter's poll) p50 %v p99 %v",
		rounds, pct(ours, 0.5).Round(time.Millisecond), pct(ours, 0.99).Round(time.Millisecond),
		pct(theirs, 0.5).Round(time.Millisecond), pct(theirs, 0.99).Round(time.Millisecond))

	// Crash failover at a 2 s lease: the leader's connection is cut; from
	// the cut until the waiter leads. client-go with the same lease, its
	// other timings scaled as its defaults are (RenewDeadline 2/3,
	// RetryPeriod 2/15 of the lease).
	const crashes = 5
	var oursCrash, theirsCrash []time.Duration
	for range crashes {
		cname := leaseName(t)
		a := newOurs(t, cname, "a")
		if _, err := a.e.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		b := newOurs(t, cname, "b")
		ch := make(chan error, 1)
		go func() { _, err := b.e.Campaign(ctx); ch <- err }()
		waitQueued(t, b.e)
		start := time.Now()
		a.px.Cut()
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		oursCrash = append(oursCrash, time.Since(start))
	}
	for range crashes {
		cname := leaseName(t)
		lg := &leadLog{t: t}
		x := startClientGoTimed(t, cname, "x", lg, 2*time.Second, 1333*time.Millisecond, 266*time.Millisecond)
		x.waitLed(t, patience)
		y := startClientGoTimed(t, cname, "y", lg, 2*time.Second, 1333*time.Millisecond, 266*time.Millisecond)
		start := time.Now()
		x.px.Cut()
		y.waitLed(t, patience)
		theirsCrash = append(theirsCrash, time.Since(start))
	}
	t.Logf("crash failover at a 2 s lease, %d rounds: ours p50 %v max %v; client-go p50 %v max %v", crashes,
		pct(oursCrash, 0.5).Round(time.Millisecond), pct(oursCrash, 1).Round(time.Millisecond),
		pct(theirsCrash, 0.5).Round(time.Millisecond), pct(theirsCrash, 1).Round(time.Millisecond))

	// Idle waiters: requests over four renewals of the leader (about
	// 20 s) while it leads.
	iname := leaseName(t)
	renewals := make(chan time.Time, 16)
	holder := newOursOpts(t, iname, kubetest.AdminToken, election.WithTTL(15*time.Second), election.WithAfterRenew(func(r election.Renewal) {
		select {
		case renewals <- r.Sent:
		default:
		}
	}))
	if _, err := holder.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	cs, ourCount := countingClient(t)
	w, err := kube.New(cs.CoordinationV1(), ns, iname, election.WithTTL(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wctx, wcancel := context.WithCancel(ctx)
	go func() { _, _ = w.Campaign(wctx) }()
	gcs, theirCount := countingClient(t)
	gctx, gcancel := context.WithCancel(ctx)
	gdone := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: iname, Namespace: ns}, Client: gcs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "cg-idle"}},
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(gdone); le.Run(gctx) }()
	waitTotal(t, ourCount, 2)   // its list and its watch
	waitTotal(t, theirCount, 1) // its first poll
	for len(renewals) > 0 {
		<-renewals
	}
	from := <-renewals
	o0, c0 := ourCount.n.Load(), theirCount.n.Load()
	var to time.Time
	for range 4 {
		to = <-renewals
	}
	o1, c1 := ourCount.n.Load(), theirCount.n.Load()
	idle := to.Sub(from)
	wcancel()
	gcancel()
	<-gdone

	t.Logf("requests per idle waiting candidate per second over %v: ours %.2f, client-go %.2f",
		idle, float64(o1-o0)/idle.Seconds(), float64(c1-c0)/idle.Seconds())
}

// waitCount waits until c has counted n more requests than now.
func waitCount(t *testing.T, c *counter, n int64) {
	t.Helper()
	waitTotal(t, c, c.n.Load()+n)
}

// waitTotal waits until c has counted want requests.
func waitTotal(t *testing.T, c *counter, want int64) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for c.n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("not %d requests within %v", want, patience)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until e's Campaign has read the Lease (its watch is
// open): an Elector's Leader answers once the Lease exists.
func waitQueued(t *testing.T, e *kube.Elector) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		if l, err := e.Leader(context.Background()); err == nil && !l.IsZero() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader seen")
}
