package electionhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
	"github.com/electkit/election/electionhttp"
)

// A replica wires the handlers into its mux and runs the election with the
// Tracker's callbacks. Here the election is in-process (backend/inmem) and
// requests are served without a socket; a real replica runs
// http.ListenAndServe(addr, mux) and publishes addr as its Value.
func Example() {
	c, err := inmem.NewCluster(inmem.Ring)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	e, err := c.Join(election.WithID("api-1"), election.WithValue([]byte("10.0.0.1:8080")))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	tr, err := electionhttp.New(e)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s served with token %s", r.Method, r.URL.Path, w.Header().Get(electionhttp.HeaderToken))
	})
	writes, err := tr.Forward(app) // writes go to the leader, reads stay here
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", tr.Health())
	mux.Handle("GET /readyz", tr.ReadyAny())
	mux.Handle("GET /leader", tr.LeaderJSON())
	mux.Handle("/", writes)

	ctx, stop := context.WithCancel(context.Background())
	elected := make(chan uint64, 1)
	done := make(chan error, 1)
	go func() {
		done <- election.Run(ctx, e, tr.Callbacks(election.Callbacks{
			OnElected: func(ctx context.Context, t *election.Term) {
				elected <- t.Token()
				<-ctx.Done() // lead until the Term ends
			},
		}))
	}()
	token := <-elected

	serve := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	fmt.Println("healthz:", serve("GET", "/healthz").Code)
	fmt.Println("readyz:", serve("GET", "/readyz").Code)
	var info electionhttp.LeaderInfo
	_ = json.NewDecoder(serve("GET", "/leader").Body).Decode(&info)
	fmt.Printf("leader: %s at %s, self %v, token matches %v\n", info.ID, info.Value, info.Self, info.Token == token)
	write := serve("POST", "/jobs")
	fmt.Println(write.Code, strings.Replace(write.Body.String(), fmt.Sprint(token), "<token>", 1))

	stop() // Run resigns
	<-done
	fmt.Println("after Run:", serve("POST", "/jobs").Code)
	// Output:
	// healthz: 200
	// readyz: 200
	// leader: api-1 at 10.0.0.1:8080, self true, token matches true
	// 200 POST /jobs served with token <token>
	// after Run: 503
}

// A follower's options: writes and everything under /admin/ go to the
// leader by redirect, at the URL of a service registry rather than the
// leader's Value.
func ExampleTracker_Forward() {
	var (
		tr  *electionhttp.Tracker // from electionhttp.New
		app http.Handler
	)
	registry := map[string]string{"api-1": "https://api-1.internal:8443"}
	h, err := tr.Forward(app,
		electionhttp.WithRedirect(),
		electionhttp.WithLeaderOnly(func(r *http.Request) bool {
			return electionhttp.IsWrite(r) || strings.HasPrefix(r.URL.Path, "/admin/")
		}),
		electionhttp.WithLeaderURL(func(l election.Leader, r *http.Request) (*url.URL, error) {
			addr, ok := registry[l.ID]
			if !ok {
				return nil, fmt.Errorf("leader %s is not registered", l.ID)
			}
			return url.Parse(addr)
		}))
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/", h)
}
