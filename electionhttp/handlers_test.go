package electionhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/electionhttp"
)

// get serves one GET of h in process and returns the answer.
func get(h http.Handler) response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	return response{rec.Code, rec.Header(), rec.Body.String()}
}

// Health is 200 while renewals go through, 503 once the deadline is within
// the slack without a renewal, and stays 503 after the deadline while the
// application has not stepped down (OnElected ignores its ctx). The lapsed
// Term is not leading even before OnDemoted. Once OnDemoted has run,
// Health is 200 again. Two Trackers wrap the same Callbacks: one with the
// default slack, one with a wide slack.
func TestHealthFailsWhenRenewalsStall(t *testing.T) {
	c := newCluster(t)
	var stalled atomic.Uint64 // the token whose renewals block
	renewed := make(chan election.Renewal, 64)
	e, err := c.Join(election.WithID("a"),
		election.WithBeforeRenew(func(ctx context.Context, t *election.Term) error {
			if stalled.Load() == t.Token() {
				<-ctx.Done() // the lease clock cancels it at the deadline
			}
			return nil
		}),
		election.WithAfterRenew(func(r election.Renewal) {
			select {
			case renewed <- r:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	wide := c.Timing().LeaseTTL / 2
	def, err := electionhttp.New(e)
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	wid, err := electionhttp.New(e, electionhttp.WithSlack(wide))
	if err != nil {
		t.Fatal(err)
	}
	defer wid.Close()

	elected := make(chan *election.Term, 4)
	demoted := make(chan *election.Term, 4)
	release := make(chan struct{})
	var first atomic.Bool
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- election.Run(ctx, e, def.Callbacks(wid.Callbacks(election.Callbacks{
			OnElected: func(ctx context.Context, t *election.Term) {
				elected <- t
				if first.CompareAndSwap(false, true) {
					<-release // stuck: ignores ctx until the test lets go
				}
			},
			OnDemoted: func(t *election.Term) { demoted <- t },
		})))
	}()
	defer func() {
		stop()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run: %v", err)
		}
	}()
	var term *election.Term
	select {
	case term = <-elected:
	case <-time.After(waitLimit):
		t.Fatal("not elected")
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	// Renewals go through: healthy and ready, at every renewal for more
	// than a lease window.
	for i := range 15 {
		select {
		case r := <-renewed:
			if r.Err != nil {
				t.Fatalf("renewal %d: %v", i, r.Err)
			}
		case <-time.After(waitLimit):
			t.Fatalf("renewal %d did not come", i)
		}
		for name, tr := range map[string]*electionhttp.Tracker{"default": def, "wide": wid} {
			if rs := get(tr.Health()); rs.code != http.StatusOK || !strings.Contains(rs.body, "ok: leading as term a@") {
				t.Fatalf("renewal %d: health (%s slack): %v, want 200 leading", i, name, rs)
			}
			if rs := get(tr.ReadyLeader()); rs.code != http.StatusOK {
				t.Fatalf("renewal %d: leader readiness (%s slack): %v, want 200", i, name, rs)
			}
		}
	}

	// Renewals stall: the wide slack fails before the deadline, naming it.
	stalled.Store(term.Token())
	eventually(t, "health with a wide slack fails", func() error {
		rs := get(wid.Health())
		if rs.code == http.StatusOK {
			return fmt.Errorf("%v", rs)
		}
		if rs.code != http.StatusServiceUnavailable || !strings.Contains(rs.body, "renewals are not getting through") {
			t.Fatalf("health with renewals stalled: %v, want 503 before the deadline (slack %v)", rs, wide)
		}
		return nil
	})

	// The deadline passes; OnElected does not return.
	select {
	case <-term.Done():
	case <-time.After(waitLimit):
		t.Fatal("the stalled Term did not end")
	}
	for name, tr := range map[string]*electionhttp.Tracker{"default": def, "wide": wid} {
		if rs := get(tr.Health()); rs.code != http.StatusServiceUnavailable || !strings.Contains(rs.body, "has not stepped down") {
			t.Errorf("health (%s slack), lapsed Term still held: %v, want 503", name, rs)
		}
		if rs := get(tr.ReadyLeader()); rs.code != http.StatusServiceUnavailable {
			t.Errorf("leader readiness (%s slack), lapsed Term still held: %v, want 503", name, rs)
		}
		if tr.Leading() != nil {
			t.Errorf("Leading (%s slack) returned a lapsed Term", name)
		}
	}

	// The application steps down: healthy again.
	close(release)
	select {
	case d := <-demoted:
		if d != term {
			t.Fatalf("OnDemoted for %v, want %v", d, term)
		}
	case <-time.After(waitLimit):
		t.Fatal("OnDemoted did not run")
	}
	for name, tr := range map[string]*electionhttp.Tracker{"default": def, "wide": wid} {
		if rs := get(tr.Health()); rs.code != http.StatusOK {
			t.Errorf("health (%s slack) after OnDemoted: %v, want 200", name, rs)
		}
	}
}

// A Term recorded with SetTerm: ReadyLeader and Health follow it, and a
// Term that ended early (Resign) is not leading and not unhealthy.
func TestSetTerm(t *testing.T) {
	c := newCluster(t)
	e, err := c.Join(election.WithID("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tr, err := electionhttp.New(e)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if rs := get(tr.ReadyLeader()); rs.code != http.StatusServiceUnavailable {
		t.Errorf("leader readiness before any Term: %v, want 503", rs)
	}
	term, err := e.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tr.SetTerm(term)
	if tr.Leading() != term {
		t.Error("Leading does not return the Term just set")
	}
	if rs := get(tr.ReadyLeader()); rs.code != http.StatusOK {
		t.Errorf("leader readiness with a valid Term: %v, want 200", rs)
	}

	// Not acting as leader any more, though the Term is valid and the
	// election still shows this process: writes are not served here, and
	// not forwarded to this process's own address either.
	tr.SetTerm(nil)
	fwd, err := tr.Forward(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("%s %s served with no Term set", r.Method, r.URL)
	}))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "503 naming this process's own ended leadership", func() error {
		rec := httptest.NewRecorder()
		fwd.ServeHTTP(rec, httptest.NewRequest("POST", "/jobs", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("write with no Term set: %d %q, want 503", rec.Code, rec.Body)
		}
		if !strings.Contains(rec.Body.String(), "a@"+token(term)+" has ended") {
			return fmt.Errorf("%q", rec.Body)
		}
		return nil
	})
	tr.SetTerm(term)

	if err := e.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rs := get(tr.ReadyLeader()); rs.code != http.StatusServiceUnavailable {
		t.Errorf("leader readiness after Resign: %v, want 503", rs)
	}
	if rs := get(tr.Health()); rs.code != http.StatusOK || !strings.Contains(rs.body, "stepping down") {
		t.Errorf("health after Resign, Term still set: %v, want 200 stepping down", rs)
	}
	tr.SetTerm(nil)
	if rs := get(tr.Health()); rs.code != http.StatusOK || !strings.Contains(rs.body, "not leading") {
		t.Errorf("health after SetTerm(nil): %v, want 200 not leading", rs)
	}
}

// ReadyLeader and LeaderJSON flip with the leadership; ReadyAny is 200 on
// every replica while the election answers, 503 once it cannot (the
// Elector is closed).
func TestReadinessAndLeaderJSON(t *testing.T) {
	c := newCluster(t)
	a := startReplica(t, c, "a", 2)
	b := startReplica(t, c, "b", 1)
	leaderJSON := func(r *replica) (electionhttp.LeaderInfo, response) {
		t.Helper()
		rs := r.do(t, "GET", "/leader", "")
		var info electionhttp.LeaderInfo
		if err := json.Unmarshal([]byte(rs.body), &info); err != nil || rs.header.Get("Content-Type") != "application/json" {
			t.Fatalf("/leader: %v: not JSON: %v", rs, err)
		}
		return info, rs
	}
	for _, r := range []*replica{a, b} {
		if info, rs := leaderJSON(r); rs.code != http.StatusOK || info.Leader || strings.TrimSpace(rs.body) != `{"leader":false}` {
			t.Errorf("/leader on %s before anyone campaigns: %v, want 200 {\"leader\":false}", r.id, rs)
		}
		if rs := r.do(t, "GET", "/readyz/any", ""); rs.code != http.StatusOK {
			t.Errorf("any-replica readiness on %s, no leader: %v, want 200", r.id, rs)
		}
	}

	a.run(election.Callbacks{})
	ta := a.waitElected(t)
	b.run(election.Callbacks{})
	check := func(leader, follower *replica, term *election.Term) {
		t.Helper()
		want := electionhttp.LeaderInfo{Leader: true, Self: true, ID: leader.id, Value: leader.srv.Listener.Addr().String(),
			Token: term.Token(), Priority: map[string]int64{"a": 2, "b": 1}[leader.id]}
		if info, rs := leaderJSON(leader); rs.code != http.StatusOK || info != want {
			t.Errorf("/leader on the leader %s: %v, want %+v", leader.id, rs, want)
		}
		want.Self = false
		eventually(t, "/leader on "+follower.id, func() error {
			if info, rs := leaderJSON(follower); info != want {
				return fmt.Errorf("%v, want %+v", rs, want)
			}
			return nil
		})
		if rs := leader.do(t, "GET", "/readyz/leader", ""); rs.code != http.StatusOK {
			t.Errorf("leader readiness on the leader %s: %v, want 200", leader.id, rs)
		}
		if rs := follower.do(t, "GET", "/readyz/leader", ""); rs.code != http.StatusServiceUnavailable {
			t.Errorf("leader readiness on the follower %s: %v, want 503", follower.id, rs)
		}
		for _, r := range []*replica{leader, follower} {
			if rs := r.do(t, "GET", "/readyz/any", ""); rs.code != http.StatusOK || !strings.Contains(rs.body, leader.id+"@") {
				t.Errorf("any-replica readiness on %s: %v, want 200 naming %s", r.id, rs, leader.id)
			}
		}
	}
	check(a, b, ta)

	a.stopRun(t) // a resigns; b takes over
	tb := b.waitElected(t)
	check(b, a, tb)

	// a's Elector is closed: the election cannot be asked there.
	a.stopRun(t)
	if err := a.e.Close(); err != nil {
		t.Fatal(err)
	}
	if rs := a.do(t, "GET", "/readyz/any", ""); rs.code != http.StatusServiceUnavailable || !strings.Contains(rs.body, "closed") {
		t.Errorf("any-replica readiness with the Elector closed: %v, want 503 naming the cause", rs)
	}
	if info, rs := leaderJSON(a); rs.code != http.StatusServiceUnavailable || !strings.Contains(info.Error, "closed") {
		t.Errorf("/leader with the Elector closed: %v, want 503 with the error", rs)
	}
	eventually(t, "a write to a after its Elector closed", func() error {
		rs := a.do(t, "POST", "/jobs", "x")
		if rs.code != http.StatusServiceUnavailable || !strings.Contains(rs.body, "stopped following") {
			return fmt.Errorf("%v", rs)
		}
		return nil
	})
}
