package electionhttp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/electkit/election"
)

// Headers that Forward sets.
const (
	// HeaderToken carries the leader's fencing token, in decimal: on a
	// request a follower proxies (the leadership it meant), on a redirect
	// (the leadership it points to), and on the answer of a request the
	// leader served itself.
	HeaderToken = "Election-Token"
	// HeaderForwarded marks a request a follower proxied to the leader; its
	// value is the leader it meant ("id@token"). A replica that does not
	// lead answers such a request 503 instead of forwarding it again. Strip
	// both headers at the edge if clients must not set them.
	HeaderForwarded = "Election-Forwarded"
)

// DefaultRetryAfter is the Retry-After that Forward's 503 answers carry by
// default (see WithRetryAfter).
const DefaultRetryAfter = time.Second

// A ForwardOption configures Forward.
type ForwardOption func(*forwardConfig)

type forwardConfig struct {
	redirect   bool
	mustLead   func(*http.Request) bool
	leaderURL  func(election.Leader, *http.Request) (*url.URL, error)
	transport  http.RoundTripper
	retryAfter time.Duration
}

// WithRedirect makes Forward answer 307 Temporary Redirect to the leader
// (the client repeats the request there, with its method and body) instead
// of proxying the request itself.
func WithRedirect() ForwardOption { return func(c *forwardConfig) { c.redirect = true } }

// WithLeaderOnly sets which requests must go to the leader; the others are
// served by this process whether it leads or not. Default IsWrite. Not nil.
func WithLeaderOnly(f func(*http.Request) bool) ForwardOption {
	return func(c *forwardConfig) { c.mustLead = f }
}

// WithLeaderURL sets how a leader's address is found: the returned URL's
// scheme, host and path prefix receive the request's path and query.
// Default LeaderURL. Not nil.
func WithLeaderURL(f func(l election.Leader, r *http.Request) (*url.URL, error)) ForwardOption {
	return func(c *forwardConfig) { c.leaderURL = f }
}

// WithTransport sets the RoundTripper the proxy sends requests to the
// leader with. Default http.DefaultTransport. Not nil.
func WithTransport(rt http.RoundTripper) ForwardOption {
	return func(c *forwardConfig) { c.transport = rt }
}

// WithRetryAfter sets the Retry-After of Forward's 503 answers, rounded up
// to whole seconds. Default DefaultRetryAfter; more than 0. A failover
// takes about a TTL on the stores: a client that retries sooner is told
// 503 again.
func WithRetryAfter(d time.Duration) ForwardOption {
	return func(c *forwardConfig) { c.retryAfter = d }
}

// IsWrite reports whether r's method is other than GET, HEAD and OPTIONS:
// Forward's default rule for what must go to the leader.
func IsWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// LeaderURL is Forward's default address of a leader: its Value as a URL
// when it has a scheme ("https://10.0.0.1:8443/api"; http or https only),
// else as "host:port" with the scheme of r (https when r came over TLS).
func LeaderURL(l election.Leader, r *http.Request) (*url.URL, error) {
	v := strings.TrimSpace(string(l.Value))
	if strings.Contains(v, "://") {
		u, err := url.Parse(v)
		if err != nil {
			return nil, err
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("value %q: want an http or https URL with a host", v)
		}
		return u, nil
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return nil, fmt.Errorf("value %q is neither a URL nor host:port: %w", v, err)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return &url.URL{Scheme: scheme, Host: v}, nil
}

// Forward returns a middleware for a service whose replicas all take
// requests but whose writes only the leader may serve. A request that
// must go to the leader (WithLeaderOnly; default IsWrite) is
//
//   - served by next when this process holds a valid Term (Leading), with
//     HeaderToken set on the answer. A forwarded request that names a
//     newer leadership than this process's gets 421 Misdirected Request:
//     this process is a stale leader;
//   - answered 503 with Retry-After when it was already forwarded
//     (HeaderForwarded) and this process does not lead: it is never
//     forwarded twice, so two replicas with stale views cannot bounce it;
//   - answered 503 with Retry-After when there is no leader, when the
//     leader is not known yet, when this process's own leadership has just
//     ended and no successor is known, or after Close;
//   - answered 502 when the leader's Value gives no address (WithLeaderURL);
//   - otherwise proxied to the leader with HeaderForwarded and HeaderToken
//     set (502 if it cannot be reached), or with WithRedirect answered 307
//     with Location at the leader and HeaderToken.
//
// Other requests go to next. The leader comes from the Tracker's copy of
// Observe, never a Leader call per request; each request reads the latest
// value, so once Observe has reported a change no request goes to the
// previous leader. A request already proxied when the leadership moves
// reaches the old leader, which serves it only if it still leads. A client
// that follows redirects may be sent round while views differ; it stops
// after its own limit (10 for net/http).
//
// A refused option is an *election.OptionError wrapping
// election.ErrInvalidOption.
func (tr *Tracker) Forward(next http.Handler, opts ...ForwardOption) (http.Handler, error) {
	if next == nil {
		return nil, &election.OptionError{Field: "next", Value: "nil", Reason: "Forward needs the handler to serve requests with"}
	}
	cfg := forwardConfig{mustLead: IsWrite, leaderURL: LeaderURL, transport: http.DefaultTransport, retryAfter: DefaultRetryAfter}
	for i, opt := range opts {
		if opt == nil {
			return nil, &election.OptionError{Field: "ForwardOption", Value: "option #" + strconv.Itoa(i) + " is nil"}
		}
		opt(&cfg)
	}
	switch {
	case cfg.mustLead == nil:
		return nil, &election.OptionError{Field: "electionhttp.WithLeaderOnly", Value: "nil", Reason: "must not be nil; omit it for IsWrite"}
	case cfg.leaderURL == nil:
		return nil, &election.OptionError{Field: "electionhttp.WithLeaderURL", Value: "nil", Reason: "must not be nil; omit it for LeaderURL"}
	case cfg.transport == nil:
		return nil, &election.OptionError{Field: "electionhttp.WithTransport", Value: "nil", Reason: "must not be nil; omit it for http.DefaultTransport"}
	case cfg.retryAfter <= 0:
		return nil, &election.OptionError{Field: "electionhttp.WithRetryAfter", Value: cfg.retryAfter.String(), Reason: "must be more than 0"}
	}
	f := &forwarder{tr: tr, next: next, cfg: cfg, retryAfter: retryAfter(cfg.retryAfter)}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			d := pr.In.Context().Value(destKey{}).(dest)
			pr.SetURL(d.url)
			pr.SetXForwarded()
			pr.Out.Header.Set(HeaderForwarded, d.leader.String())
			pr.Out.Header.Set(HeaderToken, strconv.FormatUint(d.leader.Token, 10))
		},
		Transport: cfg.transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			d := r.Context().Value(destKey{}).(dest)
			reply(w, http.StatusBadGateway, "forwarding to leader %s at %s: %v", d.leader, d.url.Redacted(), err)
		},
	}
	return f, nil
}

type forwarder struct {
	tr         *Tracker
	next       http.Handler
	cfg        forwardConfig
	retryAfter string
	proxy      *httputil.ReverseProxy
}

// dest is where the proxy sends one request, passed in its context.
type (
	destKey struct{}
	dest    struct {
		leader election.Leader
		url    *url.URL
	}
)

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.cfg.mustLead(r) {
		f.next.ServeHTTP(w, r)
		return
	}
	meant := r.Header.Get(HeaderForwarded)
	if t := f.tr.Leading(); t != nil {
		if tok, err := strconv.ParseUint(r.Header.Get(HeaderToken), 10, 64); meant != "" && err == nil && tok > t.Token() {
			reply(w, http.StatusMisdirectedRequest, "misdirected: forwarded for leadership token %d, newer than this replica's %s", tok, t)
			return
		}
		w.Header().Set(HeaderToken, strconv.FormatUint(t.Token(), 10))
		f.next.ServeHTTP(w, r)
		return
	}
	if meant != "" {
		f.unavailable(w, "request already forwarded (for leader %s), but this replica does not lead: not forwarding again", meant)
		return
	}
	l, state, self := f.tr.cached()
	switch {
	case state == unknown:
		f.unavailable(w, "no leader known yet: this replica has not heard from the election")
		return
	case state == stopped:
		f.unavailable(w, "no leader known: this replica stopped following the election")
		return
	case l.IsZero():
		f.unavailable(w, "no leader")
		return
	case self:
		f.unavailable(w, "this replica's leadership %s has ended; no successor known yet", l)
		return
	}
	u, err := f.cfg.leaderURL(l, r)
	if err != nil {
		reply(w, http.StatusBadGateway, "leader %s has no usable address: %v", l, err)
		return
	}
	if !f.cfg.redirect {
		f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), destKey{}, dest{l, u})))
		return
	}
	loc := *u
	loc.Path, loc.RawPath = joinPath(u, r.URL)
	loc.RawQuery = r.URL.RawQuery
	w.Header().Set("Location", loc.String())
	w.Header().Set(HeaderToken, strconv.FormatUint(l.Token, 10))
	reply(w, http.StatusTemporaryRedirect, "leader %s is at %s", l, loc.Redacted())
}

// unavailable answers 503 with Retry-After.
func (f *forwarder) unavailable(w http.ResponseWriter, format string, args ...any) {
	w.Header().Set("Retry-After", f.retryAfter)
	reply(w, http.StatusServiceUnavailable, format, args...)
}

// joinPath appends r's path to base's, as httputil.ProxyRequest.SetURL does.
func joinPath(base, r *url.URL) (path, rawPath string) {
	if base.Path == "" && base.RawPath == "" {
		return r.Path, r.RawPath
	}
	raw := strings.TrimSuffix(base.EscapedPath(), "/") + "/" + strings.TrimPrefix(r.EscapedPath(), "/")
	path, err := url.PathUnescape(raw) // EscapedPath's output always unescapes
	if err != nil || path == raw {
		return strings.TrimSuffix(base.Path, "/") + "/" + strings.TrimPrefix(r.Path, "/"), ""
	}
	return path, raw
}
