package electionhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
	"github.com/electkit/election/electionhttp"
	"github.com/electkit/election/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// The tests run backend/inmem in real time, not in a synctest bubble: the
// replicas serve on real loopback sockets, which a bubble does not allow.
// Every wait has this bound; on an idle machine they take milliseconds to
// about a lease window.
const waitLimit = 20 * time.Second

func newCluster(t *testing.T) *inmem.Cluster {
	t.Helper()
	c, err := inmem.NewCluster(inmem.Ring)
	if err != nil {
		t.Fatalf("NewCluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// replica is one process of a service: a member of the election, a
// Tracker, and an HTTP server on loopback whose Value is its address.
type replica struct {
	id      string
	e       *inmem.Elector
	tr      *electionhttp.Tracker
	srv     *httptest.Server
	client  *http.Client // does not follow redirects
	elected chan *election.Term

	stop context.CancelFunc
	done chan error // Run's result
}

// served is what the application handler of a replica answers.
type served struct {
	By        string // the replica that served
	Forwarded string // HeaderForwarded as it arrived
	Token     string // HeaderToken as it arrived
	Body      string
}

func startReplica(t *testing.T, c *inmem.Cluster, id string, prio int64, fopts ...electionhttp.ForwardOption) *replica {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil) // listens already: its address is the Value
	e, err := c.Join(election.WithID(id), election.WithPriority(prio), election.WithValue([]byte(srv.Listener.Addr().String())))
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	tr, err := electionhttp.New(e)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_ = json.NewEncoder(w).Encode(served{By: id, Forwarded: r.Header.Get(electionhttp.HeaderForwarded),
			Token: r.Header.Get(electionhttp.HeaderToken), Body: string(body)})
	})
	transport := &http.Transport{}
	fwd, err := tr.Forward(app, append([]electionhttp.ForwardOption{electionhttp.WithTransport(transport)}, fopts...)...)
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", tr.Health())
	mux.Handle("/readyz/leader", tr.ReadyLeader())
	mux.Handle("/readyz/any", tr.ReadyAny())
	mux.Handle("/leader", tr.LeaderJSON())
	mux.Handle("/", fwd)
	srv.Config.Handler = mux
	srv.Start()
	ctransport := &http.Transport{}
	r := &replica{id: id, e: e, tr: tr, srv: srv, elected: make(chan *election.Term, 16),
		client: &http.Client{Transport: ctransport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() {
		r.stopRun(t)
		srv.Close()
		transport.CloseIdleConnections()
		ctransport.CloseIdleConnections()
		tr.Close()
		e.Close()
	})
	return r
}

// run starts election.Run with the Tracker's callbacks; each Term goes to
// r.elected once the Tracker has recorded it.
func (r *replica) run(cb election.Callbacks) {
	ctx, stop := context.WithCancel(context.Background())
	r.stop, r.done = stop, make(chan error, 1)
	user := cb.OnElected
	cb.OnElected = func(ctx context.Context, t *election.Term) {
		r.elected <- t
		if user != nil {
			user(ctx, t)
		}
	}
	go func() { r.done <- election.Run(ctx, r.e, r.tr.Callbacks(cb)) }()
}

// stopRun ends Run (which resigns a Term it holds) and waits for it.
func (r *replica) stopRun(t *testing.T) {
	if r.stop == nil {
		return
	}
	r.stop()
	select {
	case err := <-r.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run of %s: %v", r.id, err)
		}
	case <-time.After(waitLimit):
		t.Errorf("Run of %s did not return within %v", r.id, waitLimit)
	}
	r.stop = nil
}

func (r *replica) waitElected(t *testing.T) *election.Term {
	t.Helper()
	select {
	case term := <-r.elected:
		return term
	case <-time.After(waitLimit):
		t.Fatalf("%s not elected within %v", r.id, waitLimit)
		return nil
	}
}

// response is one answer, read whole.
type response struct {
	code   int
	header http.Header
	body   string
}

func (r *replica) do(t *testing.T, method, path, body string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, r.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return send(t, r.client, req)
}

func send(t *testing.T, c *http.Client, req *http.Request) response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

func (rs response) served(t *testing.T) served {
	t.Helper()
	if rs.code != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", rs.code, rs.body)
	}
	var s served
	if err := json.Unmarshal([]byte(rs.body), &s); err != nil {
		t.Fatalf("not the application's answer: %v: %q", err, rs.body)
	}
	return s
}

func (rs response) String() string { return fmt.Sprintf("%d %q", rs.code, rs.body) }

// eventually polls f until it returns nil, failing the test after waitLimit.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, waitLimit, err)
		}
		<-tick.C
	}
}

func token(t *election.Term) string { return fmt.Sprint(t.Token()) }

// Refused arguments name the value and wrap ErrInvalidOption; nothing
// panics.
func TestRefusedArguments(t *testing.T) {
	c := newCluster(t)
	e, err := c.Join(election.WithID("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	check := func(what string, err error, want string) {
		t.Helper()
		if !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error wrapping ErrInvalidOption naming %q", what, err, want)
		}
	}
	_, err = electionhttp.New(nil)
	check("New(nil)", err, "Elector = nil")
	_, err = electionhttp.New(e, electionhttp.WithSlack(-time.Second))
	check("WithSlack(-1s)", err, "WithSlack = -1s")
	_, err = electionhttp.New(e, electionhttp.WithTimeout(0))
	check("WithTimeout(0)", err, "WithTimeout = 0s")
	_, err = electionhttp.New(e, nil)
	check("nil Option", err, "option #0 is nil")

	tr, err := electionhttp.New(e, electionhttp.WithSlack(0), electionhttp.WithTimeout(time.Second))
	if err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	defer tr.Close()
	ok := http.NotFoundHandler()
	_, err = tr.Forward(nil)
	check("Forward(nil)", err, "next = nil")
	_, err = tr.Forward(ok, electionhttp.WithLeaderOnly(nil))
	check("WithLeaderOnly(nil)", err, "WithLeaderOnly = nil")
	_, err = tr.Forward(ok, electionhttp.WithLeaderURL(nil))
	check("WithLeaderURL(nil)", err, "WithLeaderURL = nil")
	_, err = tr.Forward(ok, electionhttp.WithTransport(nil))
	check("WithTransport(nil)", err, "WithTransport = nil")
	_, err = tr.Forward(ok, electionhttp.WithRetryAfter(-time.Second))
	check("WithRetryAfter(-1s)", err, "WithRetryAfter = -1s")
	_, err = tr.Forward(ok, electionhttp.WithRedirect(), nil)
	check("nil ForwardOption", err, "option #1 is nil")
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestLeaderURL(t *testing.T) {
	plain := httptest.NewRequest("POST", "http://follower/x", nil)
	tls := httptest.NewRequest("POST", "https://follower/x", nil)
	for _, tc := range []struct {
		value string
		r     *http.Request
		want  string // "" for an error
	}{
		{"10.0.0.1:8080", plain, "http://10.0.0.1:8080"},
		{"10.0.0.1:8443", tls, "https://10.0.0.1:8443"},
		{"[::1]:80", plain, "http://[::1]:80"},
		{"https://api-1.internal:8443/v1", plain, "https://api-1.internal:8443/v1"},
		{" http://api-1:80 ", plain, "http://api-1:80"},
		{"", plain, ""},
		{"api-1", plain, ""},
		{"ftp://api-1:21", plain, ""},
		{"http://", plain, ""},
	} {
		u, err := electionhttp.LeaderURL(election.Leader{ID: "a", Token: 1, Value: []byte(tc.value)}, tc.r)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("LeaderURL(%q) = %v, want an error", tc.value, u)
		case tc.want != "" && err != nil:
			t.Errorf("LeaderURL(%q): %v, want %s", tc.value, err, tc.want)
		case tc.want != "" && u.String() != tc.want:
			t.Errorf("LeaderURL(%q) = %v, want %s", tc.value, u, tc.want)
		}
	}
}
