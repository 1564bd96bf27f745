package electionhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
)

// Health returns a liveness check: 503 Service Unavailable, with the reason
// in plain text, when this process holds a recorded Term (OnElected ran,
// OnDemoted has not) whose deadline is less than the slack away
// (WithSlack) or already past, and 200 otherwise (503 is what load
// balancers and Kubernetes probes take for unhealthy). Either the lease is about to lapse because renewals
// are not getting through, or it has lapsed and the application has not
// stepped down (OnElected ignores its ctx): a stuck process that should be
// restarted. A follower, a candidate, and a leader whose Term ended early
// (Resign, preemption) while it steps down (until the Term's old deadline)
// are healthy.
//
// client-go's HealthzAdaptor fails only once the lease is overdue by a
// timeout, because there the lease record is the only clock. Here the
// Term's deadline already ends the Term before the store can expire the
// lease (P3), so a leader past its deadline is stuck by definition, and
// one within the slack of it is failing to renew now. With a normal
// expiry under election.Run the check fails from the slack before the
// deadline until OnDemoted runs, and passes again after: as a liveness
// probe whose failure threshold outlasts the slack, it restarts only a
// process stuck past its deadline, and the shorter failures show in the
// probe's record first.
func (tr *Tracker) Health() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		t := tr.term
		if t == nil {
			tr.mu.Unlock()
			reply(w, http.StatusOK, "ok: not leading")
			return
		}
		left := clock.Until(t.Deadline())
		tr.window = max(tr.window, left)
		slack := tr.window / DefaultSlackDivisor
		tr.mu.Unlock()
		if tr.cfg.slackSet {
			slack = tr.cfg.slack
		}
		err := t.Err()
		switch {
		case left <= 0:
			reply(w, http.StatusServiceUnavailable,
				"unhealthy: %s is still held, but its lease deadline passed %v ago (%v): the application has not stepped down",
				t, round(-left), err)
		case err != nil:
			reply(w, http.StatusOK, "ok: %s ended (%v), stepping down", t, err)
		case left < slack:
			reply(w, http.StatusServiceUnavailable,
				"unhealthy: leading as %s, but the lease deadline is %v away (slack %v): renewals are not getting through",
				t, round(left), round(slack))
		default:
			reply(w, http.StatusOK, "ok: leading as %s, lease deadline in %v", t, round(left))
		}
	})
}

// ReadyLeader returns a readiness check for a service only its leader may
// serve: 200 while this process holds a valid Term (Leading), 503
// otherwise.
func (tr *Tracker) ReadyLeader() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := tr.Leading(); t != nil {
			reply(w, http.StatusOK, "ready: leading as %s", t)
			return
		}
		reply(w, http.StatusServiceUnavailable, "not ready: not the leader")
	})
}

// ReadyAny returns a readiness check for a service every replica serves
// (forwarding what must go to the leader): 200 when Elector.Leader answers
// within the timeout (WithTimeout) with a leader or with
// election.ErrNoLeader, that is when the election can be asked; 503 on any
// other error (the store cannot be reached, the Elector is closed) or when
// it does not answer in time. It does not look at this process's own
// leadership.
func (tr *Tracker) ReadyAny() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, err := tr.askLeader(r.Context())
		switch {
		case err == nil:
			reply(w, http.StatusOK, "ready: leader is %s", l)
		case errors.Is(err, election.ErrNoLeader):
			reply(w, http.StatusOK, "ready: no leader now")
		default:
			reply(w, http.StatusServiceUnavailable, "not ready: asking the election who leads: %v", err)
		}
	})
}

// LeaderInfo is LeaderJSON's answer when the election has a leader. The
// other answers are {"leader":false} (no leader now) and {"error":"…"};
// both decode into a LeaderInfo too.
type LeaderInfo struct {
	Leader   bool   `json:"leader"`          // true; false when the election has no leader now
	Self     bool   `json:"self"`            // the leader is this process's valid Term
	ID       string `json:"id"`              // Leader.ID
	Value    string `json:"value"`           // Leader.Value as text (invalid UTF-8 replaced)
	Token    uint64 `json:"token"`           // Leader.Token
	Priority int64  `json:"priority"`        // Leader.Priority
	Error    string `json:"error,omitempty"` // why the election could not be asked (status 503)
}

// LeaderJSON returns a handler that asks Elector.Leader (bounded by
// WithTimeout) and answers a LeaderInfo as JSON:
//
//	{"leader":true,"self":true,"id":"api-1","value":"10.0.0.1:8080","token":42,"priority":1}
//
// It answers 200 with {"leader":false} when the election has no leader:
// the question was answered. It answers 503 with {"error":"…"} when the
// election cannot be asked (the store cannot be reached in time, the
// Elector is closed).
func (tr *Tracker) LeaderJSON() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, err := tr.askLeader(r.Context())
		code, info := http.StatusOK, any(struct {
			Leader bool `json:"leader"`
		}{})
		switch {
		case err == nil:
			t := tr.Leading()
			info = LeaderInfo{Leader: true, Self: t != nil && t.Token() == l.Token,
				ID: l.ID, Value: string(l.Value), Token: l.Token, Priority: l.Priority}
		case errors.Is(err, election.ErrNoLeader):
		default:
			code, info = http.StatusServiceUnavailable, struct {
				Error string `json:"error"`
			}{err.Error()}
		}
		body, _ := json.Marshal(info) // cannot fail: strings, numbers and booleans
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_, _ = w.Write(append(body, '\n'))
	})
}

func (tr *Tracker) askLeader(ctx context.Context) (election.Leader, error) {
	ctx, cancel := context.WithTimeout(ctx, tr.cfg.timeout)
	defer cancel()
	return tr.e.Leader(ctx)
}

// reply writes a plain-text answer that no cache keeps.
func reply(w http.ResponseWriter, code int, format string, args ...any) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, format+"\n", args...)
}

// retryAfter formats d as a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
