package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/kubetest"
)

// KubeRow is one library's figures in the kube scenario.
type KubeRow struct {
	Lib     string `json:"library"`
	Role    string `json:"role"`
	Timings string `json:"timings"`
	// Handover: a clean release (Resign; client-go's ReleaseOnCancel) →
	// the waiter leads, 2 candidates.
	HandoverMS               []float64 `json:"handover_ms"`
	HandoverP50, HandoverP99 float64
	// Crash: the leader's connection cut → the waiter leads, at the same
	// lease duration for both; Bound is TTL + one renewal interval (ours)
	// or TTL + the longest jittered retry period (client-go).
	CrashMS            []float64 `json:"crash_ms"`
	CrashP50, CrashMax float64
	CrashBound         float64
	// Idle: N candidates of one Lease, one leading.
	Idle []*KubeIdle `json:"idle"`
	Err  string      `json:"error,omitempty"`
}

// KubeIdle is one library's idle and herd figures at N candidates.
type KubeIdle struct {
	N      int     `json:"n"`
	Window float64 `json:"window_s"`
	// Requests the N−1 waiting candidates sent per second each.
	ReqPerSec float64 `json:"requests_per_s_per_waiter"`
	// Renewals: the leader's writes of the Lease over the window.
	Renewals int `json:"renewals"`
	// Watch events each waiter received per renewal of the leader.
	EventsPerRenewal float64 `json:"events_per_renewal"`
	// Per clean handover, of the N−2 waiters that did not take over: how
	// many sent a request on the election's Lease (a read, a write, a list
	// of the candidates) from the release until Settle after the new
	// leader led, and how many tried to write the Lease.
	Handovers int     `json:"handovers"`
	Woken     float64 `json:"woken"`
	Writers   float64 `json:"writers"`
	Settle    float64 `json:"settle_ms"`
	Err       string  `json:"error,omitempty"`
}

// kubeTimings are the durations of one mode: ours' TTL and client-go's
// LeaseDuration are the same.
type kubeTimings struct {
	lease, renewDeadline, retry time.Duration
}

func (t kubeTimings) String() string {
	return fmt.Sprintf("%v / %v / %v", t.lease, t.renewDeadline.Round(time.Millisecond), t.retry.Round(time.Millisecond))
}

// kubeCount counts the requests of one candidate's clientset (its
// rest.Config's WrapTransport) and the watch events it received.
type kubeCount struct {
	rt                                  http.RoundTripper
	lease                               string // the election's Lease: requests on it are told apart
	total, onLease, leaseWrites, events atomic.Int64
}

func (c *kubeCount) RoundTrip(r *http.Request) (*http.Response, error) {
	c.total.Add(1)
	watch := r.URL.Query().Get("watch")
	isWatch := watch == "true" || watch == "1"
	p := r.URL.Path
	switch {
	case isWatch:
	case strings.HasSuffix(p, "/leases/"+c.lease):
		c.onLease.Add(1)
		if r.Method != http.MethodGet {
			c.leaseWrites.Add(1)
		}
	case strings.HasSuffix(p, "/leases") && r.Method == http.MethodGet: // a list of the candidates
		c.onLease.Add(1)
	}
	resp, err := c.rt.RoundTrip(r)
	if err == nil && isWatch {
		resp.Body = &eventCounter{ReadCloser: resp.Body, n: &c.events}
	}
	return resp, err
}

// eventCounter counts the events of a JSON watch stream: one object and a
// newline each.
type eventCounter struct {
	io.ReadCloser
	n *atomic.Int64
}

func (e *eventCounter) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	e.n.Add(int64(bytes.Count(p[:n], []byte{'\n'})))
	return n, err
}

// kubeBench is the kube scenario's server and its clients.
type kubeBench struct {
	srv *kubetest.Server
	tm  kubeTimings
	seq atomic.Int64
}

const kubeNS = "default"

// client returns a clientset to addr (the server's, or a proxy's) whose
// requests c counts, in JSON so that its watch events can be counted.
func (k *kubeBench) client(addr string, c *kubeCount) (*kubernetes.Clientset, error) {
	cfg := kubetest.Config(addr, kubetest.AdminToken)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { c.rt = rt; return c }
	return kubernetes.NewForConfig(cfg)
}

func (k *kubeBench) leaseName(what string) string {
	return fmt.Sprintf("bench-%s-%d", what, k.seq.Add(1))
}

// ourCand is one candidate of backend/kube.
type ourCand struct {
	e  *kube.Elector
	c  *kubeCount
	px *faultproxy.Proxy
}

func (k *kubeBench) ours(lease, id string, proxied bool) (*ourCand, error) {
	o := &ourCand{c: &kubeCount{lease: lease}}
	addr := k.srv.Addr
	if proxied {
		px, err := faultproxy.Start(k.srv.Addr)
		if err != nil {
			return nil, err
		}
		o.px, addr = px, px.Addr
	}
	cs, err := k.client(addr, o.c)
	if err == nil {
		o.e, err = kube.New(cs.CoordinationV1(), kubeNS, lease, election.WithID(id), election.WithTTL(k.tm.lease))
	}
	if err != nil {
		if o.px != nil {
			o.px.Close()
		}
		return nil, err
	}
	return o, nil
}

func (o *ourCand) close() {
	if o.px != nil {
		o.px.Close() // a cut candidate's requests fail at once
	}
	o.e.Close()
}

// campaign runs o's Campaign on a goroutine; the result comes on ch.
func (o *ourCand) campaign(ctx context.Context, ch chan<- kubeWon) {
	go func() {
		_, err := o.e.Campaign(ctx)
		ch <- kubeWon{id: o.e.ID(), at: time.Now(), err: err}
	}()
}

type kubeWon struct {
	id  string
	at  time.Time
	err error
}

// cgCand is one candidate of client-go's leaderelection (ReleaseOnCancel).
type cgCand struct {
	id     string
	c      *kubeCount
	px     *faultproxy.Proxy
	cancel context.CancelFunc
	done   chan struct{}
}

// clientGo starts a client-go candidate; its leadership is reported on led.
func (k *kubeBench) clientGo(lease, id string, c *kubeCount, proxied bool, led chan<- kubeWon) (*cgCand, error) {
	g := &cgCand{id: id, c: c, done: make(chan struct{})}
	addr := k.srv.Addr
	if proxied {
		px, err := faultproxy.Start(k.srv.Addr)
		if err != nil {
			return nil, err
		}
		g.px, addr = px, px.Addr
	}
	cs, err := k.client(addr, c)
	var le *leaderelection.LeaderElector
	if err == nil {
		le, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: lease, Namespace: kubeNS}, Client: cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: id}},
			LeaseDuration: k.tm.lease, RenewDeadline: k.tm.renewDeadline, RetryPeriod: k.tm.retry, ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { led <- kubeWon{id: id, at: time.Now()} },
				OnStoppedLeading: func() {},
			},
		})
	}
	if err != nil {
		if g.px != nil {
			g.px.Close()
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	g.cancel = cancel
	go func() { defer close(g.done); le.Run(ctx) }()
	return g, nil
}

// stop cancels the candidate (it releases if it leads) and waits for it.
func (g *cgCand) stop() {
	g.cancel()
	<-g.done
	if g.px != nil {
		g.px.Close()
	}
}

// waitFor polls cond every 5 ms until it holds or d passes.
func waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return fmt.Errorf("no %s within %v", what, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// recv waits for one value of ch for at most d.
func recv(ctx context.Context, ch <-chan kubeWon, d time.Duration, what string) (kubeWon, error) {
	select {
	case w := <-ch:
		return w, w.err
	case <-time.After(d):
		return kubeWon{}, fmt.Errorf("no %s within %v", what, d)
	case <-ctx.Done():
		return kubeWon{}, ctx.Err()
	}
}

// kubeRun runs the kube scenario: backend/kube beside client-go's
// leaderelection on one kube-apiserver of its own (internal/rig/kubetest).
func (r *run) kube(ctx context.Context) error {
	if _, err := kubetest.Binary(); err != nil {
		if os.Getenv("CI") != "" {
			return fmt.Errorf("the kube-apiserver is missing (CI is set: the kube scenario must run; make kube-apiserver builds it, KUBE_APISERVER names it): %w", err)
		}
		r.rep.note("NOT MEASURED: kube scenario: " + err.Error())
		return nil
	}
	dir, err := os.MkdirTemp("", "bench-kube-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	srv, err := kubetest.Start(dir)
	if err != nil {
		return err
	}
	defer srv.Close()
	r.logf("kube: kube-apiserver ready in %v", time.Since(t0).Round(time.Millisecond))
	k := &kubeBench{srv: srv, tm: kubeTimings{15 * time.Second, 10 * time.Second, 2 * time.Second}}
	samples, crashes, ns, window, handovers, settle := 20, 3, []int{2, 10, 100}, 20*time.Second, 3, time.Second
	if r.cfg.Short {
		k.tm = kubeTimings{2 * time.Second, 2 * time.Second * 2 / 3, 2 * time.Second * 2 / 15}
		samples, crashes, ns, window, handovers, settle = 2, 1, []int{2}, 2*time.Second, 1, 200*time.Millisecond
	}
	if r.cfg.Samples > 0 {
		samples, crashes = r.cfg.Samples, min(crashes, r.cfg.Samples)
	}
	rows := []*KubeRow{
		{Lib: "backend/kube", Role: "ours", Timings: fmt.Sprintf("TTL %v", k.tm.lease)},
		{Lib: "client-go leaderelection", Role: "peer", Timings: "ReleaseOnCancel, " + k.tm.String()},
	}
	for _, row := range rows {
		if r.cfg.Libs != "" && !matches(r.cfg.Libs, row.Lib) {
			continue
		}
		r.rep.Kube = append(r.rep.Kube, row)
		ours := row.Role == "ours"
		r.logf("kube: %s: handover", row.Lib)
		if ours {
			err = k.oursHandover(ctx, samples, row)
		} else {
			err = k.cgHandover(ctx, samples, row)
		}
		if err != nil {
			row.Err = "handover: " + err.Error()
			continue
		}
		r.logf("kube: %s: crash", row.Lib)
		if ours {
			row.CrashBound = float64((k.tm.lease + k.tm.lease/3).Milliseconds())
			err = k.oursCrash(ctx, crashes, row)
		} else {
			row.CrashBound = float64((k.tm.lease + k.tm.retry*22/10).Milliseconds())
			err = k.cgCrash(ctx, crashes, row)
		}
		if err != nil {
			row.Err = "crash: " + err.Error()
			continue
		}
		for _, n := range ns {
			r.logf("kube: %s: %d candidates", row.Lib, n)
			idle := &KubeIdle{N: n, Window: window.Seconds(), Settle: float64(settle.Milliseconds())}
			row.Idle = append(row.Idle, idle)
			if ours {
				err = k.oursIdle(ctx, n, window, handovers, settle, idle)
			} else {
				err = k.cgIdle(ctx, n, window, handovers, settle, idle)
			}
			if err != nil {
				idle.Err = err.Error()
			}
		}
	}
	for _, row := range r.rep.Kube {
		if row.Err != "" {
			return fmt.Errorf("%s: %s", row.Lib, row.Err)
		}
		for _, i := range row.Idle {
			if i.Err != "" {
				return fmt.Errorf("%s, %d candidates: %s", row.Lib, i.N, i.Err)
			}
		}
	}
	return nil
}

const kubePatience = time.Minute

// oursHandover: two candidates pass the leadership back and forth; from
// Resign's call to the waiter's Campaign returning.
func (k *kubeBench) oursHandover(ctx context.Context, samples int, row *KubeRow) error {
	ctx, cancel := context.WithCancel(ctx)
	lease := k.leaseName("handover")
	var cs []*ourCand
	ch := make(chan kubeWon, 2)
	pending := 0
	defer func() {
		cancel()
		for ; pending > 0; pending-- {
			<-ch
		}
		for _, c := range cs {
			c.close()
		}
	}()
	for _, id := range []string{"a", "b"} {
		c, err := k.ours(lease, id, false)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	cs[0].campaign(ctx, ch)
	pending++
	if _, err := recv(ctx, ch, kubePatience, "first leader"); err != nil {
		return err
	}
	pending--
	lead, wait := cs[0], cs[1]
	for range samples {
		wait.campaign(ctx, ch)
		pending++
		if err := waitFor(ctx, kubePatience, "waiting candidate", func() bool {
			got, err := lead.e.Candidates(ctx)
			return err == nil && len(got) == 1
		}); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond) // its watch is open
		start := time.Now()
		if err := lead.e.Resign(ctx); err != nil {
			return err
		}
		w, err := recv(ctx, ch, kubePatience, "takeover")
		if err != nil {
			return err
		}
		pending--
		row.HandoverMS = append(row.HandoverMS, float64(w.at.Sub(start).Microseconds())/1000)
		lead, wait = wait, lead
	}
	d := &Dist{MS: row.HandoverMS}
	row.HandoverP50, row.HandoverP99 = d.Q(0.5), d.Q(0.99)
	return nil
}

// cgHandover: the leader's Run is canceled (ReleaseOnCancel) at a random
// phase of the waiter's polling; from the cancel to the waiter's
// OnStartedLeading. A fresh waiter joins each round.
func (k *kubeBench) cgHandover(ctx context.Context, samples int, row *KubeRow) error {
	lease := k.leaseName("cg-handover")
	led := make(chan kubeWon, samples+2)
	var all []*cgCand
	defer func() {
		for _, g := range all {
			g.stop()
		}
	}()
	start := func(id string) (*cgCand, error) {
		g, err := k.clientGo(lease, id, &kubeCount{lease: lease}, false, led)
		if err == nil {
			all = append(all, g)
		}
		return g, err
	}
	lead, err := start("cg0")
	if err != nil {
		return err
	}
	if _, err := recv(ctx, led, kubePatience, "first leader"); err != nil {
		return err
	}
	for i := range samples {
		wait, err := start(fmt.Sprintf("cg%d", i+1))
		if err != nil {
			return err
		}
		if err := waitFor(ctx, kubePatience, "the waiter's first poll", func() bool { return wait.c.onLease.Load() > 0 }); err != nil {
			return err
		}
		time.Sleep(rand.N(k.tm.retry)) // a random phase of its polls
		t0 := time.Now()
		lead.stop()
		w, err := recv(ctx, led, kubePatience, "takeover")
		if err != nil {
			return err
		}
		if w.id != wait.id {
			return fmt.Errorf("%s led after the release, want %s", w.id, wait.id)
		}
		row.HandoverMS = append(row.HandoverMS, float64(w.at.Sub(t0).Microseconds())/1000)
		lead = wait
	}
	d := &Dist{MS: row.HandoverMS}
	row.HandoverP50, row.HandoverP99 = d.Q(0.5), d.Q(0.99)
	return nil
}

// oursCrash: the leader's connection is cut; from the cut to the waiter's
// Campaign returning. Fresh candidates each sample.
func (k *kubeBench) oursCrash(ctx context.Context, samples int, row *KubeRow) error {
	for range samples {
		err := func() error {
			ctx, cancel := context.WithCancel(ctx)
			lease := k.leaseName("crash")
			ch := make(chan kubeWon, 2)
			a, err := k.ours(lease, "a", true)
			if err != nil {
				cancel()
				return err
			}
			defer a.close()
			b, err := k.ours(lease, "b", false)
			if err != nil {
				cancel()
				return err
			}
			defer b.close()
			defer cancel() // before the closes: no Campaign left under them
			a.campaign(ctx, ch)
			if _, err := recv(ctx, ch, kubePatience, "first leader"); err != nil {
				return err
			}
			b.campaign(ctx, ch)
			if err := waitFor(ctx, kubePatience, "waiting candidate", func() bool {
				got, err := b.e.Candidates(ctx)
				return err == nil && len(got) == 1
			}); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
			t0 := time.Now()
			a.px.Cut()
			w, err := recv(ctx, ch, 2*kubePatience, "failover")
			if err != nil {
				return err
			}
			row.CrashMS = append(row.CrashMS, float64(w.at.Sub(t0).Microseconds())/1000)
			return nil
		}()
		if err != nil {
			return err
		}
	}
	d := &Dist{MS: row.CrashMS}
	row.CrashP50, row.CrashMax = d.Q(0.5), d.Q(1)
	return nil
}

// cgCrash: the client-go leader's connection is cut; from the cut to the
// waiter's OnStartedLeading.
func (k *kubeBench) cgCrash(ctx context.Context, samples int, row *KubeRow) error {
	for range samples {
		err := func() error {
			lease := k.leaseName("cg-crash")
			led := make(chan kubeWon, 2)
			x, err := k.clientGo(lease, "x", &kubeCount{lease: lease}, true, led)
			if err != nil {
				return err
			}
			defer x.stop()
			if _, err := recv(ctx, led, kubePatience, "first leader"); err != nil {
				return err
			}
			y, err := k.clientGo(lease, "y", &kubeCount{lease: lease}, false, led)
			if err != nil {
				return err
			}
			defer y.stop()
			if err := waitFor(ctx, kubePatience, "the waiter's first poll", func() bool { return y.c.onLease.Load() > 0 }); err != nil {
				return err
			}
			t0 := time.Now()
			x.px.Cut()
			w, err := recv(ctx, led, 2*kubePatience, "failover")
			if err != nil {
				return err
			}
			if w.id != "y" {
				return fmt.Errorf("%s led after the cut, want y", w.id)
			}
			row.CrashMS = append(row.CrashMS, float64(w.at.Sub(t0).Microseconds())/1000)
			return nil
		}()
		if err != nil {
			return err
		}
	}
	d := &Dist{MS: row.CrashMS}
	row.CrashP50, row.CrashMax = d.Q(0.5), d.Q(1)
	return nil
}

// snap is the counts of a set of candidates at one instant.
type snap struct{ total, onLease, writes, events []int64 }

func take(cs []*kubeCount) snap {
	var s snap
	for _, c := range cs {
		s.total = append(s.total, c.total.Load())
		s.onLease = append(s.onLease, c.onLease.Load())
		s.writes = append(s.writes, c.leaseWrites.Load())
		s.events = append(s.events, c.events.Load())
	}
	return s
}

// steadyFigures fills idle's request rate and events per renewal from
// two snapshots window apart; leader is the index of the leading
// candidate.
func steadyFigures(s0, s1 snap, leader int, took time.Duration, idle *KubeIdle) {
	var reqs, events int64
	waiters := 0
	for i := range s0.total {
		if i == leader {
			continue
		}
		waiters++
		reqs += s1.total[i] - s0.total[i]
		events += s1.events[i] - s0.events[i]
	}
	idle.Window = took.Seconds()
	idle.Renewals = int(s1.writes[leader] - s0.writes[leader])
	if waiters > 0 {
		idle.ReqPerSec = float64(reqs) / took.Seconds() / float64(waiters)
		if idle.Renewals > 0 {
			idle.EventsPerRenewal = float64(events) / float64(waiters) / float64(idle.Renewals)
		}
	}
}

// herdFigures adds one handover's woken and writers from two snapshots,
// leaving out the old and the new leader.
func herdFigures(s0, s1 snap, old, next int, idle *KubeIdle) {
	for i := range s0.total {
		if i == old || i == next {
			continue
		}
		if s1.onLease[i] > s0.onLease[i] {
			idle.Woken++
		}
		if s1.writes[i] > s0.writes[i] {
			idle.Writers++
		}
	}
}

// oursIdle: n candidates of backend/kube on one Lease, each with its own
// counted clientset; the steady window, then clean handovers.
func (k *kubeBench) oursIdle(ctx context.Context, n int, window time.Duration, handovers int, settle time.Duration, idle *KubeIdle) error {
	ctx, cancel := context.WithCancel(ctx)
	lease := k.leaseName(fmt.Sprintf("idle%d", n))
	var cs []*ourCand
	var counts []*kubeCount
	index := map[string]int{}
	ch := make(chan kubeWon, n+1)
	pending := 0
	defer func() {
		cancel()
		for ; pending > 0; pending-- {
			<-ch
		}
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(c.close)
		}
		wg.Wait()
	}()
	for i := range n {
		c, err := k.ours(lease, fmt.Sprintf("i%d", i), false)
		if err != nil {
			return err
		}
		cs, counts = append(cs, c), append(counts, c.c)
		index[c.e.ID()] = i
	}
	cs[0].campaign(ctx, ch)
	pending++
	if _, err := recv(ctx, ch, kubePatience, "first leader"); err != nil {
		return err
	}
	pending--
	leader := 0
	for _, c := range cs[1:] {
		c.campaign(ctx, ch)
		pending++
	}
	registered := func() bool {
		got, err := cs[0].e.Candidates(ctx)
		return err == nil && len(got) == n-1
	}
	if err := waitFor(ctx, 2*kubePatience, fmt.Sprintf("%d waiting candidates", n-1), registered); err != nil {
		return err
	}
	time.Sleep(window / 4) // past the registrations
	s0, t0 := take(counts), time.Now()
	time.Sleep(window)
	s1 := take(counts)
	steadyFigures(s0, s1, leader, time.Since(t0), idle)
	if n < 3 {
		return nil
	}
	for range handovers {
		time.Sleep(200 * time.Millisecond)
		s0 := take(counts)
		if err := cs[leader].e.Resign(ctx); err != nil {
			return err
		}
		w, err := recv(ctx, ch, kubePatience, "takeover")
		if err != nil {
			return err
		}
		pending--
		time.Sleep(settle)
		s1 := take(counts)
		next := index[w.id]
		herdFigures(s0, s1, leader, next, idle)
		idle.Handovers++
		cs[leader].campaign(ctx, ch) // back in the queue
		pending++
		leader = next
		if err := waitFor(ctx, kubePatience, "the old leader to wait", registered); err != nil {
			return err
		}
	}
	idle.Woken /= float64(idle.Handovers)
	idle.Writers /= float64(idle.Handovers)
	return nil
}

// cgIdle: n client-go candidates on one Lease, each with its own counted
// clientset; the steady window, then clean handovers (the leader's Run
// canceled; it joins again as a new waiter with the same identity).
func (k *kubeBench) cgIdle(ctx context.Context, n int, window time.Duration, handovers int, settle time.Duration, idle *KubeIdle) error {
	lease := k.leaseName(fmt.Sprintf("cg-idle%d", n))
	led := make(chan kubeWon, n+handovers+1)
	gs := make([]*cgCand, n)
	counts := make([]*kubeCount, n)
	index := map[string]int{}
	defer func() {
		var wg sync.WaitGroup
		for _, g := range gs {
			if g != nil {
				wg.Go(g.stop)
			}
		}
		wg.Wait()
	}()
	var err error
	for i := range n {
		counts[i] = &kubeCount{lease: lease}
		id := fmt.Sprintf("i%d", i)
		index[id] = i
		if gs[i], err = k.clientGo(lease, id, counts[i], false, led); err != nil {
			return err
		}
		if i == 0 {
			if _, err := recv(ctx, led, kubePatience, "first leader"); err != nil {
				return err
			}
		}
	}
	leader := 0
	if err := waitFor(ctx, kubePatience, "every waiter's first poll", func() bool {
		for _, c := range counts {
			if c.onLease.Load() == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	time.Sleep(window / 4)
	s0, t0 := take(counts), time.Now()
	time.Sleep(window)
	s1 := take(counts)
	steadyFigures(s0, s1, leader, time.Since(t0), idle)
	if n < 3 {
		return nil
	}
	for range handovers {
		time.Sleep(time.Duration(rand.N(int64(k.tm.retry))))
		s0 := take(counts)
		gs[leader].stop()
		w, err := recv(ctx, led, kubePatience, "takeover")
		if err != nil {
			return err
		}
		time.Sleep(settle)
		s1 := take(counts)
		next := index[w.id]
		herdFigures(s0, s1, leader, next, idle)
		idle.Handovers++
		if gs[leader], err = k.clientGo(lease, fmt.Sprintf("i%d", leader), counts[leader], false, led); err != nil {
			gs[leader] = nil
			return err
		}
		leader = next
	}
	idle.Woken /= float64(idle.Handovers)
	idle.Writers /= float64(idle.Handovers)
	return nil
}

// kubeMarkdown renders the kube scenario's tables.
func (r *Report) kubeMarkdown(w func(string, ...any)) {
	if len(r.Kube) == 0 {
		return
	}
	w("## Kubernetes: backend/kube beside client-go's leaderelection\n\n")
	w("One kube-apiserver v1.37 (built from k8s.io/kubernetes, over an embedded etcd), loopback; each candidate on a clientset of its own whose requests a rest.Config WrapTransport counts (JSON, so that its watch events can be counted too). Timings: ours' TTL is client-go's LeaseDuration; client-go runs with ReleaseOnCancel, LeaseDuration / RenewDeadline / RetryPeriod as shown. Handover: a clean release (Resign; client-go: the leader's Run canceled at a random phase of the waiter's polls) → the waiter leads, two candidates. Crash: the leader's connection cut → the waiter leads; the bound is TTL + one renewal interval (ours: TTL/3) or TTL + client-go's longest jittered retry (2.2 × RetryPeriod).\n\n")
	w("| library | timings | handover p50 / p99 ms (n) | crash failover p50 / max ms (n) | crash bound ms | note |\n|---|---|---|---|---|---|\n")
	for _, k := range r.Kube {
		note := ""
		if k.Err != "" {
			note = "error: " + k.Err
		}
		w("| %s | %s | %s / %s (%d) | %s / %s (%d) | %s | %s |\n", k.Lib, k.Timings,
			ms(k.HandoverP50), ms(k.HandoverP99), len(k.HandoverMS), ms(k.CrashP50), ms(k.CrashMax), len(k.CrashMS), ms(k.CrashBound), note)
	}
	w("\nIdle: N candidates of one Lease, one leading: the requests each of the N−1 waiters sent per second over the window (ours: its candidate record's renewals, every TTL/3; client-go: its polls, every RetryPeriod jittered up to 2.2×), the leader's renewals over the window, the watch events each waiter received per renewal (client-go's waiters watch nothing). Handover at N ≥ 3: per clean release, of the N−2 waiters that did not take over, how many sent a request on the election's Lease (read, write, or a list of the candidate records) from the release until the settle time after the new leader led, and how many tried to write it.\n\n")
	w("| library | N | window s | requests/s per waiter | leader renewals | watch events per waiter per renewal | handovers | waiters woken | waiters writing | settle ms | note |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range r.Kube {
		for _, i := range k.Idle {
			note := ""
			if i.Err != "" {
				note = "error: " + i.Err
			}
			woken, writers := "—", "—"
			if i.Handovers > 0 {
				woken, writers = fmt.Sprintf("%.1f of %d", i.Woken, i.N-2), fmt.Sprintf("%.1f", i.Writers)
			}
			w("| %s | %d | %.1f | %.3f | %d | %.2f | %d | %s | %s | %.0f | %s |\n", k.Lib, i.N, i.Window, i.ReqPerSec, i.Renewals, i.EventsPerRenewal,
				i.Handovers, woken, writers, i.Settle, note)
		}
	}
	w("\n")
}
