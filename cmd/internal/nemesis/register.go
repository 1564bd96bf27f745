package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/electkit/election/internal/mono"
)

// Paths of the register's HTTP/JSON interface. Both take a POST with a JSON
// body; a malformed body is answered 400 with a one-line reason.
const (
	// WritePath takes a WriteRequest and answers a WriteResponse.
	WritePath = "/write"
	// ReportPath takes an Event and answers 204 No Content.
	ReportPath = "/report"
)

// maxBody bounds a request body: a write or an event is a few hundred bytes.
const maxBody = 1 << 20

// WriteRequest is the JSON body of a POST to WritePath.
type WriteRequest struct {
	Client string `json:"client"`
	PID    int    `json:"pid"`
	Token  uint64 `json:"token"`
	Value  string `json:"value"`
	// Call is the candidate's Mono instant when it decided to write, right
	// after it checked that its Term was valid.
	Call int64 `json:"call"`
}

// WriteResponse is the JSON answer to a WriteRequest.
type WriteResponse struct {
	OK bool `json:"ok"`
	// The register's state just before the write.
	PrevToken uint64 `json:"prev_token"`
	PrevValue string `json:"prev_value"`
}

// Register is a fenced register: a single value guarded by the highest
// fencing token it has accepted. With fencing on, a write is accepted iff
// its token is at least the highest accepted so far; with fencing off every
// write is accepted, which lets a stale leader overwrite a newer one (the
// negative control of the linearizability checker).
//
// Writes are serialized; each is logged with the Mono instant the register
// answered it. Candidates also report their leadership Events to the
// register, so one process holds the whole history of a run.
//
// The register serves HTTP/JSON on a loopback port for candidate processes
// (see RegisterClient) and has in-process methods for candidates that run
// inside the test process.
type Register struct {
	fenced bool
	ln     net.Listener
	srv    *http.Server
	served chan struct{} // closed when the HTTP server's goroutine returned

	mu      sync.Mutex
	highest uint64 // the highest token accepted so far
	value   string
	writes  []Write
	events  []Event
	seen    map[eventID]bool // numbered events recorded
	subs    map[*subscriber]struct{}
	closed  bool

	closeOnce sync.Once
	closeErr  error
}

// NewRegister starts a register serving on 127.0.0.1 at a port the kernel
// picks (see Addr). fenced chooses whether writes are checked against the
// highest accepted token. The caller must Close it.
func NewRegister(fenced bool) (*Register, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("nemesis: register listen: %w", err)
	}
	r := &Register{
		fenced: fenced,
		ln:     ln,
		served: make(chan struct{}),
		subs:   make(map[*subscriber]struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc(WritePath, r.handleWrite)
	mux.HandleFunc(ReportPath, r.handleReport)
	r.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(r.served)
		_ = r.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return r, nil
}

// Addr is the host:port the register serves on, for DialRegister.
func (r *Register) Addr() string { return r.ln.Addr().String() }

// Fenced tells whether the register refuses writes with a stale token.
func (r *Register) Fenced() bool { return r.fenced }

// Write applies one write from an in-process candidate and reports whether
// the register accepted it. call is the candidate's Mono instant when it
// decided to write; the logged Return is the Mono instant of the answer.
func (r *Register) Write(client string, pid int, token uint64, value string, call int64) (ok bool) {
	w := r.write(client, pid, token, value, call)
	return w.OK
}

func (r *Register) write(client string, pid int, token uint64, value string, call int64) Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := Write{
		Client:    client,
		PID:       pid,
		Token:     token,
		Value:     value,
		Call:      call,
		OK:        !r.fenced || token >= r.highest,
		PrevToken: r.highest,
		PrevValue: r.value,
	}
	if w.OK {
		// Unfenced, a stale write overwrites the value but the highest
		// token accepted so far stays the highest.
		r.highest = max(r.highest, token)
		r.value = value
	}
	w.Return = mono.Now()
	r.writes = append(r.writes, w)
	return w
}

// eventID identifies a numbered event.
type eventID struct {
	cand string
	pid  int
	seq  uint64
}

// Report records an event of an in-process candidate and passes it to every
// subscriber. A numbered event (Seq > 0) already recorded is dropped: a
// report retried after its answer was lost.
func (r *Register) Report(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Seq > 0 {
		id := eventID{ev.Candidate, ev.PID, ev.Seq}
		if r.seen[id] {
			return
		}
		if r.seen == nil {
			r.seen = map[eventID]bool{}
		}
		r.seen[id] = true
	}
	r.events = append(r.events, ev)
	for s := range r.subs {
		s.push(ev)
	}
}

// Writes returns a copy of every write, in the order the register served
// them.
func (r *Register) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.writes...)
}

// Events returns a copy of every reported event, in arrival order.
func (r *Register) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Leader returns the newest Elected event whose candidate reported no
// Demoted after it: who leads now, as reported. It knows nothing of kills or
// of Deadlines that passed without a report, so a killed leader stays the
// leader here until another candidate reports Elected.
func (r *Register) Leader() (ev Event, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	demoted := make(map[string]bool)
	for i := len(r.events) - 1; i >= 0; i-- {
		e := r.events[i]
		switch e.Kind {
		case Demoted:
			demoted[e.Candidate] = true
		case Elected:
			if !demoted[e.Candidate] {
				return e, true
			}
		}
	}
	return Event{}, false
}

// Subscribe returns a channel carrying every event reported from now on, in
// arrival order, and a cancel func that stops the subscription and closes
// the channel. The register queues events for a slow reader without bound
// and never blocks on it, so no event is dropped; a reader that stops
// reading must cancel. Close cancels every subscription.
func (r *Register) Subscribe() (<-chan Event, func()) {
	s := &subscriber{
		out:    make(chan Event, 64),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		close(s.out)
		return s.out, func() {}
	}
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	go s.pump()
	cancel := func() {
		r.mu.Lock()
		delete(r.subs, s)
		r.mu.Unlock()
		s.stop()
	}
	return s.out, cancel
}

// Close stops the HTTP server, waits for its goroutine and cancels every
// subscription. The history stays readable. Close is idempotent.
func (r *Register) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		subs := r.subs
		r.subs = make(map[*subscriber]struct{})
		r.mu.Unlock()
		for s := range subs {
			s.stop()
		}
		r.closeErr = r.srv.Close()
		<-r.served
	})
	return r.closeErr
}

func (r *Register) handleWrite(w http.ResponseWriter, req *http.Request) {
	var wr WriteRequest
	if !decodePost(w, req, &wr) {
		return
	}
	if wr.Client == "" {
		http.Error(w, "nemesis: write without a client", http.StatusBadRequest)
		return
	}
	got := r.write(wr.Client, wr.PID, wr.Token, wr.Value, wr.Call)
	writeJSON(w, WriteResponse{OK: got.OK, PrevToken: got.PrevToken, PrevValue: got.PrevValue})
}

func (r *Register) handleReport(w http.ResponseWriter, req *http.Request) {
	var ev Event
	if !decodePost(w, req, &ev) {
		return
	}
	switch ev.Kind {
	case Elected, Renewed, Demoted, Ended:
	default:
		http.Error(w, fmt.Sprintf("nemesis: event kind %q is not elected, renewed, ended or demoted", ev.Kind), http.StatusBadRequest)
		return
	}
	if ev.Candidate == "" {
		http.Error(w, "nemesis: event without a candidate", http.StatusBadRequest)
		return
	}
	r.Report(ev)
	w.WriteHeader(http.StatusNoContent)
}

// decodePost reads a JSON body into v, answering 405 or 400 itself when it
// cannot.
func decodePost(w http.ResponseWriter, req *http.Request, v any) bool {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "nemesis: POST only", http.StatusMethodNotAllowed)
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		http.Error(w, "nemesis: bad JSON body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	if dec.More() {
		http.Error(w, "nemesis: bad JSON body: more than one value", http.StatusBadRequest)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// subscriber queues events for one Subscribe channel; its pump goroutine
// moves them to the channel at the reader's pace.
type subscriber struct {
	mu     sync.Mutex
	queue  []Event
	out    chan Event
	wake   chan struct{} // one pending wake-up for the pump
	done   chan struct{} // closed by stop
	exited chan struct{} // closed when pump returned
	once   sync.Once
}

func (s *subscriber) push(ev Event) {
	s.mu.Lock()
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) pump() {
	defer close(s.exited)
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			ev := s.queue[0]
			s.queue[0] = Event{}
			s.queue = s.queue[1:]
			s.mu.Unlock()
			select {
			case s.out <- ev:
			case <-s.done:
				return
			}
		}
	}
}

// stop ends the pump, waits for it and closes the channel; idempotent.
func (s *subscriber) stop() {
	s.once.Do(func() {
		close(s.done)
		<-s.exited
		close(s.out)
	})
}

// RegisterClient writes to a Register and reports events to it over HTTP,
// on behalf of one candidate process. It is safe for concurrent use.
type RegisterClient struct {
	base   string
	client string
	pid    int
	http   *http.Client
}

// DialRegister returns a client of the register at addr (Register.Addr) for
// the candidate with ID client in process pid. It opens no connection until
// the first call.
func DialRegister(addr, client string, pid int) *RegisterClient {
	return &RegisterClient{
		base:   "http://" + addr,
		client: client,
		pid:    pid,
		http: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // loopback: never through a proxy
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		}},
	}
}

// Write asks the register to write value with token and reports whether it
// was accepted. call is the Mono instant the candidate decided to write,
// right after it checked its Term was valid. An error means the answer is
// unknown: the register may or may not have applied the write. The context
// bounds the request.
func (c *RegisterClient) Write(ctx context.Context, token uint64, value string, call int64) (ok bool, err error) {
	var resp WriteResponse
	err = c.post(ctx, WritePath, WriteRequest{Client: c.client, PID: c.pid, Token: token, Value: value, Call: call}, &resp)
	if err != nil {
		return false, err
	}
	return resp.OK, nil
}

// Report sends one event to the register. An empty Candidate or a zero PID
// is filled in with the client's. The context bounds the request.
func (c *RegisterClient) Report(ctx context.Context, ev Event) error {
	if ev.Candidate == "" {
		ev.Candidate = c.client
	}
	if ev.PID == 0 {
		ev.PID = c.pid
	}
	return c.post(ctx, ReportPath, ev, nil)
}

// Close releases the client's idle connections.
func (c *RegisterClient) Close() { c.http.CloseIdleConnections() }

func (c *RegisterClient) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("nemesis: encode %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("nemesis: %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return ctxErr
		}
		return fmt.Errorf("nemesis: %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("nemesis: %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("nemesis: decode %s answer: %w", path, err)
	}
	return nil
}
