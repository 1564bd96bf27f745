package electionhttp_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/electkit/election"
	"github.com/electkit/election/electionhttp"
)

// Two replicas, each with an HTTP server on loopback. Writes to the
// follower reach the leader (proxied, or redirected with 307) with the
// leader's token; reads stay local. When the leader's Run ends (it
// resigns) the other replica leads and forwarding follows it; no write is
// ever served by a replica that does not lead. With no leader, 503.
func TestForwardThroughLeaderChange(t *testing.T) {
	for _, mode := range []string{"proxy", "redirect"} {
		t.Run(mode, func(t *testing.T) {
			var opts []electionhttp.ForwardOption
			if mode == "redirect" {
				opts = append(opts, electionhttp.WithRedirect())
			}
			c := newCluster(t)
			a := startReplica(t, c, "a", 2, opts...)
			b := startReplica(t, c, "b", 1, opts...)
			a.run(election.Callbacks{})
			ta := a.waitElected(t)
			b.run(election.Callbacks{})

			// write sends a write to r and returns who served it, following
			// a redirect by hand so that its Location and token are checked.
			write := func(r *replica, leader *replica, term *election.Term) (served, response) {
				t.Helper()
				rs := r.do(t, "POST", "/jobs?n=1", "job-1")
				if mode == "redirect" && rs.code == http.StatusTemporaryRedirect {
					if want := leader.srv.URL + "/jobs?n=1"; rs.header.Get("Location") != want {
						t.Fatalf("redirect to %q, want %q", rs.header.Get("Location"), want)
					}
					if got := rs.header.Get(electionhttp.HeaderToken); got != token(term) {
						t.Fatalf("redirect carries token %q, want %s", got, token(term))
					}
					rs = leader.do(t, "POST", "/jobs?n=1", "job-1")
				}
				if rs.code != http.StatusOK {
					return served{}, rs
				}
				return rs.served(t), rs
			}

			// The follower learns the leader from Observe; until then it
			// answers 503, never serves the write itself.
			eventually(t, "a write to b reaches a", func() error {
				s, rs := write(b, a, ta)
				if rs.code == http.StatusServiceUnavailable {
					return fmt.Errorf("%v", rs)
				}
				if s.By != "a" || s.Body != "job-1" {
					t.Fatalf("write to b: %v, want served by a with its body", rs)
				}
				return nil
			})
			if mode == "proxy" {
				s, rs := write(b, a, ta)
				if s.Forwarded != "a@"+token(ta) || s.Token != token(ta) {
					t.Errorf("proxied request arrived with %s=%q %s=%q, want a@%s and %s",
						electionhttp.HeaderForwarded, s.Forwarded, electionhttp.HeaderToken, s.Token, token(ta), token(ta))
				}
				if got := rs.header.Get(electionhttp.HeaderToken); got != token(ta) {
					t.Errorf("answer via b carries token %q, want the leader's %s", got, token(ta))
				}
			} else {
				// A client that follows redirects repeats the POST and its
				// body at the leader.
				req, _ := http.NewRequest("POST", b.srv.URL+"/jobs", strings.NewReader("job-2"))
				s := send(t, &http.Client{Transport: b.client.Transport}, req).served(t)
				if s.By != "a" || s.Body != "job-2" {
					t.Errorf("followed redirect: served by %s with body %q, want a with job-2", s.By, s.Body)
				}
			}
			if s := b.do(t, "GET", "/jobs", "").served(t); s.By != "b" {
				t.Errorf("a read on b was served by %s, want b itself", s.By)
			}
			if s, rs := write(a, a, ta); s.By != "a" || s.Forwarded != "" || rs.header.Get(electionhttp.HeaderToken) != token(ta) {
				t.Errorf("write on the leader: %v, want served by a, not forwarded, with token %s", rs, token(ta))
			}

			// A request already forwarded is never forwarded again, and a
			// leader older than the one a request names refuses it.
			if rs := b.do(t, "POST", "/jobs", "x", electionhttp.HeaderForwarded, "a@1"); rs.code != http.StatusServiceUnavailable ||
				rs.header.Get("Retry-After") == "" || !strings.Contains(rs.body, "not forwarding again") {
				t.Errorf("forwarded request at the follower: %v, want 503 with Retry-After, not forwarded again", rs)
			}
			newer := strconv.FormatUint(ta.Token()+1, 10)
			if rs := a.do(t, "POST", "/jobs", "x", electionhttp.HeaderForwarded, "z@"+newer, electionhttp.HeaderToken, newer); rs.code != http.StatusMisdirectedRequest {
				t.Errorf("request naming a newer leadership at the leader: %v, want 421", rs)
			}

			// a's Run ends: it resigns, and b takes over.
			a.stopRun(t)
			if ta.Err() == nil {
				t.Fatal("a's Term still valid after its Run returned")
			}
			tb := b.waitElected(t)
			if tb.Token() <= ta.Token() {
				t.Fatalf("b's token %d not above a's %d", tb.Token(), ta.Token())
			}
			if s, rs := write(b, b, tb); s.By != "b" || rs.header.Get(electionhttp.HeaderToken) != token(tb) {
				t.Errorf("write on the new leader: %v, want served by b with token %s", rs, token(tb))
			}
			eventually(t, "a write to a reaches b", func() error {
				s, rs := write(a, b, tb)
				switch {
				case rs.code == http.StatusServiceUnavailable:
					return fmt.Errorf("%v", rs)
				case s.By != "b":
					t.Fatalf("write to a after it stepped down: %v, want served by b or 503", rs)
				case mode == "proxy" && s.Token != token(tb):
					t.Fatalf("forwarded with token %q, want b's %s", s.Token, token(tb))
				}
				return nil
			})
			if rs := b.do(t, "GET", "/readyz/leader", ""); rs.code != http.StatusOK {
				t.Errorf("b's leader readiness: %v, want 200", rs)
			}

			// Nobody campaigns: no leader, 503 with Retry-After on both.
			b.stopRun(t)
			for _, r := range []*replica{a, b} {
				eventually(t, "no leader at "+r.id, func() error {
					rs := r.do(t, "POST", "/jobs", "x")
					switch {
					case rs.code == http.StatusTemporaryRedirect: // to b, until r hears that b stepped down
						return fmt.Errorf("%v", rs)
					case rs.code == http.StatusOK:
						t.Fatalf("write to %s served with nobody leading: %v", r.id, rs)
					case rs.code != http.StatusServiceUnavailable || rs.header.Get("Retry-After") != "1":
						t.Fatalf("write to %s with nobody leading: %v, want 503 with Retry-After: 1", r.id, rs)
					case !strings.Contains(rs.body, "no leader"):
						return fmt.Errorf("%v", rs)
					}
					return nil
				})
			}
		})
	}
}

// A leader whose Value is no address: 502 naming it, not a panic, not a
// local answer. Routes chosen with WithLeaderOnly go to the leader even for
// GET, others stay local even for POST; a WithLeaderURL function decides
// the address.
func TestForwardRoutes(t *testing.T) {
	c := newCluster(t)
	lead, err := c.Join(election.WithID("lead"), election.WithValue([]byte("no-port")))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close()
	term, err := lead.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "admin %s %s %s", r.URL.Path, r.Header.Get(electionhttp.HeaderForwarded), r.Header.Get(electionhttp.HeaderToken))
	}))
	defer admin.Close()
	adminURL, _ := url.Parse(admin.URL + "/base")
	f := startReplica(t, c, "f", 0)
	g := startReplica(t, c, "g", 0,
		electionhttp.WithLeaderOnly(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/admin/") }),
		electionhttp.WithLeaderURL(func(l election.Leader, r *http.Request) (*url.URL, error) {
			if l.ID != "lead" {
				return nil, fmt.Errorf("unknown leader %s", l)
			}
			return adminURL, nil
		}))
	t.Cleanup(func() { admin.Client().CloseIdleConnections() })

	eventually(t, "502 for a leader without an address", func() error {
		rs := f.do(t, "POST", "/jobs", "x")
		switch {
		case rs.code == http.StatusServiceUnavailable: // f has not heard of the leader yet
			return fmt.Errorf("%v", rs)
		case rs.code != http.StatusBadGateway || !strings.Contains(rs.body, "lead@"+token(term)) || !strings.Contains(rs.body, `"no-port"`):
			t.Fatalf("write to f with the leader's Value %q: %v, want 502 naming the leader and the value", "no-port", rs)
		}
		return nil
	})
	eventually(t, "g forwards /admin/ to the leader's URL", func() error {
		rs := g.do(t, "GET", "/admin/stats", "")
		if rs.code == http.StatusServiceUnavailable {
			return fmt.Errorf("%v", rs)
		}
		if want := "admin /base/admin/stats lead@" + token(term) + " " + token(term); rs.code != http.StatusOK || rs.body != want {
			t.Fatalf("GET /admin/stats on g: %v, want 200 %q", rs, want)
		}
		return nil
	})
	if s := g.do(t, "POST", "/jobs", "x").served(t); s.By != "g" {
		t.Errorf("POST /jobs on g (not a leader-only route) served by %s, want g", s.By)
	}
	if s := f.do(t, "GET", "/admin/stats", "").served(t); s.By != "f" {
		t.Errorf("GET on f (default rule: reads are local) served by %s, want f", s.By)
	}

	// The leader resigns: f answers 503 once it has heard, not 502 to the
	// old leader.
	if err := lead.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "503 once the leader resigned", func() error {
		if rs := f.do(t, "POST", "/jobs", "x"); rs.code != http.StatusServiceUnavailable {
			return fmt.Errorf("%v", rs)
		}
		return nil
	})

	// A leader that cannot be reached: 502 naming it and the error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	down, err := c.Join(election.WithID("down"), election.WithValue([]byte(gone)))
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, err := down.Campaign(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "502 for a leader that cannot be reached", func() error {
		rs := f.do(t, "POST", "/jobs", "x")
		if rs.code == http.StatusServiceUnavailable {
			return fmt.Errorf("%v", rs)
		}
		if rs.code != http.StatusBadGateway || !strings.Contains(rs.body, "forwarding to leader down@") || !strings.Contains(rs.body, gone) {
			t.Fatalf("write with the leader unreachable: %v, want 502 naming it and %s", rs, gone)
		}
		return nil
	})
}
