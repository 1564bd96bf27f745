package nemesis

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/electkit/election/internal/mono"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRegister(t *testing.T, fenced bool) *Register {
	t.Helper()
	r, err := NewRegister(fenced)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func dial(t *testing.T, r *Register, client string, pid int) *RegisterClient {
	t.Helper()
	c := DialRegister(r.Addr(), client, pid)
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRegisterFencedOverHTTP(t *testing.T) {
	r := newRegister(t, true)
	a := dial(t, r, "a", 11)
	b := dial(t, r, "b", 12)
	ctx := testCtx(t)

	steps := []struct {
		c      *RegisterClient
		token  uint64
		value  string
		wantOK bool
	}{
		{a, 5, "a5", true},
		{b, 7, "b7", true},
		{a, 5, "a5-stale", false}, // lower token refused
		{b, 7, "b7-again", true},  // equal token accepted
		{a, 9, "a9", true},        // higher token accepted
		{b, 8, "b8-stale", false},
	}
	for i, s := range steps {
		call := mono.Now()
		ok, err := s.c.Write(ctx, s.token, s.value, call)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if ok != s.wantOK {
			t.Fatalf("step %d: write token %d = %v, want %v", i, s.token, ok, s.wantOK)
		}
	}
	ws := r.Writes()
	if len(ws) != len(steps) {
		t.Fatalf("%d writes logged, want %d", len(ws), len(steps))
	}
	for i, w := range ws {
		s := steps[i]
		if w.Token != s.token || w.Value != s.value || w.OK != s.wantOK {
			t.Errorf("write %d logged as %+v, want token %d value %q ok %v", i, w, s.token, s.value, s.wantOK)
		}
		if w.Return < w.Call {
			t.Errorf("write %d: Return %d before Call %d", i, w.Return, w.Call)
		}
	}
	if ws[0].Client != "a" || ws[0].PID != 11 || ws[1].Client != "b" || ws[1].PID != 12 {
		t.Errorf("clients logged as %s/%d and %s/%d, want a/11 and b/12", ws[0].Client, ws[0].PID, ws[1].Client, ws[1].PID)
	}
	// The refused write saw (7, "b7"); the last one saw (9, "a9").
	if ws[2].PrevToken != 7 || ws[2].PrevValue != "b7" {
		t.Errorf("write 2 prev = (%d, %q), want (7, b7)", ws[2].PrevToken, ws[2].PrevValue)
	}
	if ws[5].PrevToken != 9 || ws[5].PrevValue != "a9" {
		t.Errorf("write 5 prev = (%d, %q), want (9, a9)", ws[5].PrevToken, ws[5].PrevValue)
	}
}

func TestRegisterUnfencedAcceptsAll(t *testing.T) {
	r := newRegister(t, false)
	if r.Fenced() {
		t.Fatal("Fenced() = true for an unfenced register")
	}
	c := dial(t, r, "a", 0)
	ctx := testCtx(t)
	for _, tok := range []uint64{9, 3, 1, 9, 2} {
		ok, err := c.Write(ctx, tok, fmt.Sprint("v", tok), mono.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("unfenced register refused token %d", tok)
		}
	}
	ws := r.Writes()
	if got := ws[2]; got.PrevToken != 9 || got.PrevValue != "v3" {
		t.Errorf("third write prev = (%d, %q), want the highest token 9 and the last value v3", got.PrevToken, got.PrevValue)
	}
}

func TestRegisterInProcessWrite(t *testing.T) {
	r := newRegister(t, true)
	if !r.Write("a", 0, 4, "x", mono.Now()) {
		t.Fatal("first write refused")
	}
	if r.Write("b", 0, 3, "y", mono.Now()) {
		t.Fatal("lower token accepted")
	}
	if n := len(r.Writes()); n != 2 {
		t.Fatalf("%d writes logged, want 2", n)
	}
}

func TestRegisterLeaderAndSubscribe(t *testing.T) {
	r := newRegister(t, true)
	ch, cancel := r.Subscribe()
	defer cancel()
	a := dial(t, r, "a", 1)
	ctx := testCtx(t)

	if _, ok := r.Leader(); ok {
		t.Fatal("Leader before any event")
	}
	sent := []Event{
		{Kind: Elected, Token: 1, At: 10, Deadline: 100},
		{Kind: Renewed, Token: 1, At: 50, Deadline: 150},
	}
	for _, ev := range sent {
		if err := a.Report(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	r.Report(Event{Kind: Elected, Candidate: "b", Token: 2, At: 200, Deadline: 300})
	if err := a.Report(ctx, Event{Kind: Demoted, Token: 1, At: 160, Err: "expired"}); err != nil {
		t.Fatal(err)
	}
	l, ok := r.Leader()
	if !ok || l.Candidate != "b" || l.Token != 2 {
		t.Fatalf("Leader = %+v, %v; want b with token 2", l, ok)
	}
	r.Report(Event{Kind: Demoted, Candidate: "b", Token: 2, At: 250})
	if l, ok := r.Leader(); ok {
		t.Fatalf("Leader = %+v after every candidate was demoted", l)
	}

	want := []string{"elected a 1", "renewed a 1", "elected b 2", "demoted a 1", "demoted b 2"}
	timeout := time.After(30 * time.Second)
	for i, w := range want {
		select {
		case ev := <-ch:
			if got := fmt.Sprintf("%s %s %d", ev.Kind, ev.Candidate, ev.Token); got != w {
				t.Fatalf("event %d = %q, want %q", i, got, w)
			}
			if ev.Candidate == "a" && ev.PID != 1 {
				t.Errorf("event %d: PID %d, want the client's 1", i, ev.PID)
			}
		case <-timeout:
			t.Fatalf("event %d (%s) never arrived", i, w)
		}
	}
	if got := len(r.Events()); got != len(want) {
		t.Fatalf("%d events logged, want %d", got, len(want))
	}
}

func TestRegisterSubscribeSlowReaderLosesNothing(t *testing.T) {
	r := newRegister(t, true)
	ch, cancel := r.Subscribe()
	const n = 1000 // far more than the channel buffers
	for i := range n {
		r.Report(Event{Kind: Renewed, Candidate: "a", Token: uint64(i)})
	}
	timeout := time.After(30 * time.Second)
	for i := range n {
		select {
		case ev := <-ch:
			if ev.Token != uint64(i) {
				t.Fatalf("event %d carries token %d", i, ev.Token)
			}
		case <-timeout:
			t.Fatalf("event %d never arrived", i)
		}
	}
	cancel()
	cancel() // idempotent
	if _, open := <-ch; open {
		t.Fatal("channel still open after cancel")
	}
}

func TestRegisterCloseEndsSubscriptions(t *testing.T) {
	r, err := NewRegister(true)
	if err != nil {
		t.Fatal(err)
	}
	ch, cancel := r.Subscribe()
	defer cancel()
	r.Report(Event{Kind: Elected, Candidate: "a", Token: 1})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for range ch { // drains and ends: Close closed it
	}
	ch2, cancel2 := r.Subscribe()
	defer cancel2()
	if _, open := <-ch2; open {
		t.Fatal("Subscribe after Close returned an open channel")
	}
	if len(r.Events()) != 1 {
		t.Fatal("history lost on Close")
	}
}

func TestRegisterBadRequests(t *testing.T) {
	r := newRegister(t, true)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	base := "http://" + r.Addr()
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"write not JSON", http.MethodPost, WritePath, "{not json", http.StatusBadRequest},
		{"write wrong type", http.MethodPost, WritePath, `{"client":"a","token":"seven"}`, http.StatusBadRequest},
		{"write unknown field", http.MethodPost, WritePath, `{"client":"a","tokn":7}`, http.StatusBadRequest},
		{"write no client", http.MethodPost, WritePath, `{"token":7}`, http.StatusBadRequest},
		{"write two values", http.MethodPost, WritePath, `{"client":"a"}{"client":"b"}`, http.StatusBadRequest},
		{"write empty body", http.MethodPost, WritePath, ``, http.StatusBadRequest},
		{"write GET", http.MethodGet, WritePath, ``, http.StatusMethodNotAllowed},
		{"report not JSON", http.MethodPost, ReportPath, "]", http.StatusBadRequest},
		{"report bad kind", http.MethodPost, ReportPath, `{"Kind":"crowned","Candidate":"a"}`, http.StatusBadRequest},
		{"report no candidate", http.MethodPost, ReportPath, `{"Kind":"elected"}`, http.StatusBadRequest},
		{"write ok", http.MethodPost, WritePath, `{"client":"a","token":1,"value":"v","call":5}`, http.StatusOK},
		{"report ok", http.MethodPost, ReportPath, `{"Kind":"elected","Candidate":"a","Token":1}`, http.StatusNoContent},
	}
	for _, c := range cases {
		req, err := http.NewRequestWithContext(testCtx(t), c.method, base+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
	}
	if n, m := len(r.Writes()), len(r.Events()); n != 1 || m != 1 {
		t.Fatalf("bad requests reached the history: %d writes, %d events; want 1 and 1", n, m)
	}
	// The client surfaces a refusal as an error naming the status.
	err := dial(t, r, "a", 1).Report(testCtx(t), Event{Kind: "crowned"})
	if err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("Report of a bad kind: err = %v, want a 400", err)
	}
}

func TestRegisterClientCanceledContext(t *testing.T) {
	r := newRegister(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := dial(t, r, "a", 1).Write(ctx, 1, "v", mono.Now())
	if err != context.Canceled {
		t.Fatalf("Write with a canceled context: err = %v, want context.Canceled", err)
	}
}

// TestRegisterConcurrent has many clients write at once; under -race it
// checks the register's locking, and the log must show a register whose
// highest accepted token never went down.
func TestRegisterConcurrent(t *testing.T) {
	r := newRegister(t, true)
	ctx := testCtx(t)
	const clients, writes = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := dial(t, r, fmt.Sprint("c", i), 100+i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range writes {
				tok := uint64(j*clients + i)
				if _, err := c.Write(ctx, tok, fmt.Sprint(i, "/", j), mono.Now()); err != nil {
					errs <- err
					return
				}
				r.Report(Event{Kind: Renewed, Candidate: c.client, Token: tok})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ws := r.Writes()
	if len(ws) != clients*writes {
		t.Fatalf("%d writes logged, want %d", len(ws), clients*writes)
	}
	var highest uint64
	for i, w := range ws {
		if w.PrevToken != highest {
			t.Fatalf("write %d saw prev token %d, the log says %d", i, w.PrevToken, highest)
		}
		if w.OK != (w.Token >= highest) {
			t.Fatalf("write %d: token %d against %d answered %v", i, w.Token, highest, w.OK)
		}
		if w.OK {
			highest = w.Token
		}
	}
	if len(r.Events()) != clients*writes {
		t.Fatalf("%d events, want %d", len(r.Events()), clients*writes)
	}
}

// TestRegisterDropsRetriedReports: a numbered event reported twice (a retry
// after a lost answer) is recorded once; unnumbered events are all kept.
func TestRegisterDropsRetriedReports(t *testing.T) {
	r, err := NewRegister(true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := DialRegister(r.Addr(), "a", 10)
	defer c.Close()
	ev := Event{Kind: Elected, Token: 3, At: 5, Deadline: 9, Seq: 1}
	for range 2 {
		if err := c.Report(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	other := ev
	other.PID = 11 // another process of a: its own numbering
	r.Report(other)
	r.Report(Event{Kind: Demoted, Candidate: "a", PID: 11, Token: 3, At: 7})
	r.Report(Event{Kind: Demoted, Candidate: "a", PID: 11, Token: 3, At: 7})
	got := r.Events()
	if len(got) != 4 {
		t.Fatalf("%d events recorded, want 4: %+v", len(got), got)
	}
	if got[0].PID != 10 || got[0].Seq != 1 || got[1].PID != 11 {
		t.Errorf("events %+v", got)
	}
}
