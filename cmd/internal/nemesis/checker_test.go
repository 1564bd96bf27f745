package nemesis

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/electkit/election/internal/mono"
)

const ms = int64(time.Millisecond)

// t0 is the Mono start of every hand-made history.
const t0 = int64(1_000_000) * ms

func at(msFromStart int64) int64 { return t0 + msFromStart*ms }

func elected(c string, tok uint64, atMs, deadlineMs int64) Event {
	return Event{Kind: Elected, Candidate: c, Token: tok, At: at(atMs), Deadline: at(deadlineMs)}
}

func renewed(c string, tok uint64, atMs, deadlineMs int64) Event {
	return Event{Kind: Renewed, Candidate: c, Token: tok, At: at(atMs), Deadline: at(deadlineMs)}
}

func demoted(c string, tok uint64, atMs int64) Event {
	return Event{Kind: Demoted, Candidate: c, Token: tok, At: at(atMs), Err: "lost"}
}

func write(c string, tok uint64, v string, callMs, retMs int64, ok bool, prevTok uint64, prevV string) Write {
	return Write{Client: c, Token: tok, Value: v, Call: at(callMs), Return: at(retMs), OK: ok, PrevToken: prevTok, PrevValue: prevV}
}

// goodHistory is a clean run: a leads with token 1, is demoted, b leads with
// token 2 after a 100 ms failover, and is demoted when the run ends.
func goodHistory() *History {
	return &History{
		Backend: "test", Seed: 42, Fenced: true,
		Start: t0, End: at(3000),
		Events: []Event{
			elected("a", 1, 10, 510),
			renewed("a", 1, 300, 810),
			renewed("a", 1, 600, 1110),
			demoted("a", 1, 1000), // before its Deadline: valid until 1000
			elected("b", 2, 1100, 1600),
			renewed("b", 2, 1400, 1900),
			demoted("b", 2, 1800),
		},
		Writes: []Write{
			write("a", 1, "a1", 20, 25, true, 0, ""),
			write("a", 1, "a2", 400, 420, true, 1, "a1"),
			// a stale write of a, answered after b's write: refused
			write("b", 2, "b1", 1150, 1200, true, 1, "a2"),
			write("a", 1, "a3", 990, 1210, false, 2, "b1"),
			write("b", 2, "b2", 1500, 1510, true, 2, "b1"),
		},
		Faults: []Fault{{Kind: "pause", Target: "a", Start: at(900), End: at(1000)}},
	}
}

func TestCheckGoodHistory(t *testing.T) {
	h := goodHistory()
	vis := filepath.Join(t.TempDir(), "vis.html")
	r := Check(h, CheckOptions{FailoverBound: time.Second, VisPath: vis})
	if !r.OK() {
		t.Fatalf("clean history failed:\n%s", r)
	}
	if len(r.Verdicts) != 6 {
		t.Fatalf("%d verdicts, want 6", len(r.Verdicts))
	}
	if r.Leaderships != 2 || r.Accepted != 4 || r.Refused != 1 || r.FaultsByKind["pause"] != 1 {
		t.Errorf("figures: %d leaderships, %d accepted, %d refused, faults %v", r.Leaderships, r.Accepted, r.Refused, r.FaultsByKind)
	}
	if r.WorstFailover != 100*time.Millisecond {
		t.Errorf("worst failover %v, want 100ms", r.WorstFailover)
	}
	if _, err := os.Stat(vis); err != nil {
		t.Errorf("visualization not written though VisPath was set: %v", err)
	}
	s := r.String()
	for _, want := range []string{"backend test", "seed 42", "pause 1", "leaderships 2", "accepted 4", "refused 1", "worst failover 100ms", NameLinearizable, NameFailover} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "FAIL") {
		t.Errorf("summary of a clean run mentions a failure:\n%s", s)
	}
}

func TestCheckLinearizableStaleWriteUnfenced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale Write
	}{
		// a's stale write starts after b's write returned.
		{"after", write("a", 1, "a-stale", 1300, 1310, true, 2, "b1")},
		// a's stale write overlaps b's write in time, but the register
		// answered it after b's: still illegal, since it saw token 2.
		{"overlapping", write("a", 1, "a-stale", 1100, 1310, true, 2, "b1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &History{Start: t0, End: at(2000), Writes: []Write{
				write("a", 1, "a1", 20, 25, true, 0, ""),
				write("b", 2, "b1", 1150, 1200, true, 1, "a1"),
				tc.stale,
			}}
			vis := filepath.Join(t.TempDir(), "vis.html")
			v := CheckLinearizable(h, vis)
			if v.OK {
				t.Fatalf("stale write accepted after a higher token judged linearizable: %s", v.Detail)
			}
			if v.At != tc.stale.Return || !strings.Contains(v.Detail, "write #2") {
				t.Errorf("violation at %d (%s), want the stale write at %d", v.At, v.Detail, tc.stale.Return)
			}
			b, err := os.ReadFile(vis)
			if err != nil {
				t.Fatalf("no visualization for a failed check: %v", err)
			}
			if !strings.Contains(string(b), "<html") {
				t.Errorf("visualization is not HTML: %.100s", b)
			}
		})
	}
}

// TestCheckLinearizableRegister runs the same writes through a fenced and
// an unfenced register: the fenced log is linearizable, the unfenced one is
// the negative control.
func TestCheckLinearizableRegister(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		r := newRegister(t, fenced)
		start := mono.Now()
		r.Write("a", 0, 1, "a1", mono.Now())
		r.Write("b", 0, 2, "b1", mono.Now())
		r.Write("a", 0, 1, "a-stale", mono.Now())
		r.Write("b", 0, 2, "b2", mono.Now())
		h := &History{Fenced: fenced, Start: start, End: mono.Now(), Writes: r.Writes()}
		v := CheckLinearizable(h, "")
		if v.OK != fenced {
			t.Errorf("fenced=%v: linearizable = %v (%s)", fenced, v.OK, v.Detail)
		}
	}
}

func TestCheckLinearizableRefusedWrongly(t *testing.T) {
	h := &History{Start: t0, Writes: []Write{
		write("a", 3, "a", 0, 1, true, 0, ""),
		write("b", 4, "b", 2, 3, false, 3, "a"), // a higher token refused
	}}
	if v := CheckLinearizable(h, ""); v.OK {
		t.Fatalf("a refused higher token judged linearizable: %s", v.Detail)
	}
	if v := CheckLinearizable(&History{Start: t0}, ""); !v.OK {
		t.Fatalf("no writes judged not linearizable: %s", v.Detail)
	}
}

func TestCheckValidTermsOverlap(t *testing.T) {
	h := &History{Start: t0, End: at(3000), Events: []Event{
		elected("a", 1, 0, 500),
		renewed("a", 1, 300, 800),
		elected("b", 2, 700, 1200), // a's Term is valid until 800
		demoted("a", 1, 900),
		demoted("b", 2, 1100),
	}}
	v := CheckValidTerms(h)
	if v.OK {
		t.Fatalf("overlapping Terms judged valid: %s", v.Detail)
	}
	if v.At != at(700) {
		t.Errorf("violation at %s, want +700ms", rel(h, v.At))
	}
	for _, want := range []string{"a token 1", "b token 2", "+700.000ms", "+800.000ms", "100.000ms"} {
		if !strings.Contains(v.Detail, want) {
			t.Errorf("detail lacks %q: %s", want, v.Detail)
		}
	}
}

func TestCheckValidTermsKilled(t *testing.T) {
	base := func(bElectedMs int64) *History {
		return &History{Start: t0, End: at(3000),
			Events: []Event{
				elected("a", 1, 0, 500),
				renewed("a", 1, 300, 800), // then a is killed: valid until 800
				elected("b", 2, bElectedMs, bElectedMs+500),
				demoted("b", 2, bElectedMs+400),
			},
			Killed: map[string]int64{"a": at(350)},
		}
	}
	if v := CheckValidTerms(base(850)); !v.OK {
		t.Errorf("b elected after a's last Deadline judged invalid: %s", v.Detail)
	}
	if v := CheckValidTerms(base(750)); v.OK || v.At != at(750) {
		t.Errorf("b elected before killed a's last Deadline: OK=%v at %d (%s)", v.OK, v.At, v.Detail)
	}
	if got := WorstFailover(base(850)); got != 50*time.Millisecond {
		t.Errorf("worst failover %v, want 50ms", got)
	}
}

func TestCheckWrites(t *testing.T) {
	if v := CheckWrites(goodHistory()); !v.OK {
		t.Fatalf("clean history: %s", v.Detail)
	}
	for _, tc := range []struct {
		name string
		w    Write
		want string
	}{
		{"after its Term", write("a", 1, "late", 1050, 1060, false, 2, "b1"), "+1050.000ms: its Term was valid +10.000ms..+1000.000ms (demoted)"},
		{"before its Term", write("b", 2, "early", 1050, 1160, false, 1, "a2"), "+1050.000ms: its Term was valid +1100.000ms..+1800.000ms"},
		{"no Term", write("c", 9, "ghost", 500, 510, true, 1, "a2"), "no Term of its writer has that token"},
		{"another process", Write{Client: "a", PID: 99, Token: 1, Value: "x", Call: at(500), Return: at(510)}, "no Term of its writer"},
	} {
		h := goodHistory()
		h.Writes = append(h.Writes, tc.w)
		v := CheckWrites(h)
		if v.OK || v.At != tc.w.Call || !strings.Contains(v.Detail, tc.want) {
			t.Errorf("%s: OK=%v at %s: %s; want a failure at the write's call naming %q", tc.name, v.OK, rel(h, v.At), v.Detail, tc.want)
		}
	}
	// A killed process's Term may have been renewed without a report: its
	// writes are held to its Start only.
	h := goodHistory()
	h.Events = h.Events[:3] // a never demoted
	h.Events = append(h.Events, elected("b", 2, 1300, 1600), demoted("b", 2, 1800))
	h.Killed = map[string]int64{"a": at(1200)}
	h.Writes = []Write{write("a", 1, "a1", 1150, 1160, true, 0, "")}
	if v := CheckWrites(h); !v.OK {
		t.Errorf("a killed process's write after its last reported deadline: %s", v.Detail)
	}
}

// TestTermsLateRenewal: a Renewed reported after its Term's Demoted (a
// late after-renewal hook) still counts for the Term's deadline and is no
// P5 violation.
func TestTermsLateRenewal(t *testing.T) {
	h := &History{Start: t0, End: at(3000), Events: []Event{
		elected("a", 1, 0, 500),
		demoted("a", 1, 700),
		renewed("a", 1, 710, 900), // the renewal was recorded before 500
		elected("b", 2, 1000, 1500),
		demoted("b", 2, 1400),
	}}
	ts := Terms(h)
	if len(ts) != 2 || ts[0].End != at(700) || ts[0].EndedBy != "demoted" {
		t.Fatalf("Terms = %+v; want a's Term to end at its Demoted, +700ms", ts)
	}
	if v := CheckCallbacks(h); !v.OK {
		t.Errorf("a late Renewed of the Term just demoted: %s", v.Detail)
	}
	// The first renewal's reply may come back before OnElected starts.
	early := append(append([]Event(nil), h.Events...), renewed("b", 2, 999, 1600))
	if v := CheckCallbacks(&History{Start: t0, End: at(3000), Events: early}); !v.OK {
		t.Errorf("a Renewed just before its Elected: %s", v.Detail)
	}
	h.Events = append(h.Events, renewed("a", 5, 1200, 1300))
	if v := CheckCallbacks(h); v.OK {
		t.Errorf("a Renewed of a token a never held passed: %s", v.Detail)
	}
}

// TestCheckValidTermsRestartedID: a killed process's Term stays valid
// until its last Deadline even when a new process with the same candidate
// ID is elected; an Elected before that Deadline is an overlap.
func TestCheckValidTermsRestartedID(t *testing.T) {
	h := func(newElectedMs int64) *History {
		return &History{Start: t0, End: at(3000),
			Events: []Event{
				{Kind: Elected, Candidate: "a", PID: 10, Token: 1, At: at(0), Deadline: at(500)},
				{Kind: Renewed, Candidate: "a", PID: 10, Token: 1, At: at(300), Deadline: at(800)},
				{Kind: Elected, Candidate: "a", PID: 11, Token: 2, At: at(newElectedMs), Deadline: at(newElectedMs + 500)},
				{Kind: Demoted, Candidate: "a", PID: 11, Token: 2, At: at(newElectedMs + 400)},
			},
			Faults: []Fault{{Kind: "kill", Target: "a", PID: 10, Start: at(350)}},
		}
	}
	if v := CheckValidTerms(h(850)); !v.OK {
		t.Errorf("a new process elected after the killed one's last Deadline judged invalid: %s", v.Detail)
	}
	if v := CheckValidTerms(h(750)); v.OK || v.At != at(750) {
		t.Errorf("a new process elected before the killed one's last Deadline: OK=%v at %s (%s)", v.OK, rel(h(750), v.At), v.Detail)
	}
}

func TestCheckTokens(t *testing.T) {
	ok := goodHistory()
	if v := CheckTokens(ok); !v.OK {
		t.Fatalf("clean history: %s", v.Detail)
	}
	repeated := &History{Start: t0, Events: []Event{
		elected("a", 5, 0, 100), demoted("a", 5, 50),
		elected("b", 5, 200, 300), demoted("b", 5, 250),
	}}
	v := CheckTokens(repeated)
	if v.OK || !strings.Contains(v.Detail, "P1") || v.At != at(200) {
		t.Errorf("token granted twice: OK=%v at %d: %s", v.OK, v.At, v.Detail)
	}
	decreasing := &History{Start: t0, Events: []Event{
		elected("a", 5, 0, 100), demoted("a", 5, 50),
		elected("b", 7, 200, 300), demoted("b", 7, 250),
		elected("a", 6, 400, 500), demoted("a", 6, 450),
	}}
	v = CheckTokens(decreasing)
	if v.OK || !strings.Contains(v.Detail, "P2") || v.At != at(400) {
		t.Errorf("decreasing token: OK=%v at %d: %s", v.OK, v.At, v.Detail)
	}
	// Arrival order does not matter, Elected.At does.
	shuffled := &History{Start: t0, Events: []Event{
		elected("b", 7, 200, 300), elected("a", 5, 0, 100),
	}}
	if v := CheckTokens(shuffled); !v.OK {
		t.Errorf("increasing tokens reported out of order judged decreasing: %s", v.Detail)
	}
}

func TestCheckCallbacks(t *testing.T) {
	if v := CheckCallbacks(goodHistory()); !v.OK {
		t.Fatalf("clean history: %s", v.Detail)
	}
	cases := []struct {
		name   string
		h      *History
		ok     bool
		atMs   int64
		detail string
	}{
		{"elected without demoted", &History{Start: t0, Events: []Event{
			elected("a", 1, 0, 100), renewed("a", 1, 50, 150),
		}}, false, 0, "never demoted"},
		{"killed while leading", &History{Start: t0, Events: []Event{
			elected("a", 1, 0, 100), renewed("a", 1, 50, 150),
		}, Killed: map[string]int64{"a": at(60)}}, true, 0, ""},
		{"elected twice", &History{Start: t0, Events: []Event{
			elected("a", 1, 0, 100), elected("a", 2, 50, 150), demoted("a", 2, 60),
		}}, false, 50, "while its Term with token 1"},
		{"renewed without elected", &History{Start: t0, Events: []Event{
			renewed("a", 1, 10, 100),
		}}, false, 10, "no Elected of its process has that token"},
		{"demoted without elected", &History{Start: t0, Events: []Event{
			demoted("a", 1, 10),
		}}, false, 10, "without an open Elected"},
		{"renewed with another token", &History{Start: t0, Events: []Event{
			elected("a", 1, 0, 100), renewed("a", 2, 20, 120), demoted("a", 1, 30),
		}}, false, 20, "no Elected of its process has that token"},
		{"demoted with another token", &History{Start: t0, Events: []Event{
			elected("a", 1, 0, 100), demoted("a", 2, 30),
		}}, false, 30, "open Term has token 1"},
		{"new process after a kill", &History{Start: t0, Events: []Event{
			{Kind: Elected, Candidate: "a", PID: 10, Token: 1, At: at(0), Deadline: at(100)},
			{Kind: Elected, Candidate: "a", PID: 11, Token: 3, At: at(500), Deadline: at(600)},
			{Kind: Demoted, Candidate: "a", PID: 11, Token: 3, At: at(550)},
		}, Faults: []Fault{{Kind: "kill", Target: "a", PID: 10, Start: at(20)}}}, true, 0, ""},
	}
	for _, c := range cases {
		v := CheckCallbacks(c.h)
		if v.OK != c.ok {
			t.Errorf("%s: OK = %v (%s), want %v", c.name, v.OK, v.Detail, c.ok)
			continue
		}
		if !c.ok && (v.At != at(c.atMs) || !strings.Contains(v.Detail, c.detail)) {
			t.Errorf("%s: at %s: %q; want +%dms and %q", c.name, rel(c.h, v.At), v.Detail, c.atMs, c.detail)
		}
	}
}

func TestCheckFailover(t *testing.T) {
	// The last fault (a kill of a, instantaneous) is at 350; a's Term is
	// valid until 800; b is elected at 1000.
	h := &History{Start: t0, End: at(3000),
		Events: []Event{
			elected("a", 1, 0, 500), renewed("a", 1, 300, 800),
			elected("b", 2, 1000, 1500), demoted("b", 2, 1400),
		},
		Faults: []Fault{
			{Kind: "pause", Target: "b", Start: at(100), End: at(200)},
			{Kind: "kill", Target: "a", Start: at(350)},
		},
		Killed: map[string]int64{"a": at(350)},
	}
	if v := CheckFailover(h, 10*time.Millisecond); !v.OK {
		t.Errorf("a's Term valid at the last fault's end: %s", v.Detail)
	}
	if got := WorstFailover(h); got != 200*time.Millisecond {
		t.Errorf("worst failover %v, want 200ms", got)
	}

	// A fault that ends at 900, after a's Term: b is elected 100 ms later.
	h.Faults = append(h.Faults, Fault{Kind: "cut", Target: "b", Start: at(400), End: at(900)})
	if v := CheckFailover(h, 150*time.Millisecond); !v.OK {
		t.Errorf("leader 100ms after the last fault, bound 150ms: %s", v.Detail)
	}
	v := CheckFailover(h, 50*time.Millisecond)
	if v.OK || v.At != at(950) {
		t.Errorf("leader 100ms after the last fault, bound 50ms: OK=%v at %s: %s", v.OK, rel(h, v.At), v.Detail)
	}
	if !strings.Contains(v.Detail, "worst failover 200.000ms") {
		t.Errorf("detail lacks the worst failover: %s", v.Detail)
	}

	// No leader after the last fault at all.
	h.Faults = append(h.Faults, Fault{Kind: "store-leader", Start: at(2000), End: at(2100)})
	if v := CheckFailover(h, time.Second); v.OK || !strings.Contains(v.Detail, "no leader") {
		t.Errorf("no leader after the last fault: OK=%v: %s", v.OK, v.Detail)
	}
	if v := CheckFailover(h, 0); v.OK {
		t.Errorf("a zero bound passed: %s", v.Detail)
	}
}

func TestReportStringShowsViolation(t *testing.T) {
	h := goodHistory()
	h.Seed = 777
	h.Fenced = false
	// b is elected while a is still valid (until its Demoted at 1000),
	// then a write far from it that must stay out of the window.
	h.Events[4] = elected("b", 2, 950, 1600)
	h.End = at(4000)
	h.Events = append(h.Events, elected("b", 3, 3400, 3900), demoted("b", 3, 3800))
	h.Writes = append(h.Writes, write("b", 3, "late", 3500, 3510, true, 2, "b2"))
	r := Check(h, CheckOptions{})
	if r.OK() {
		t.Fatalf("overlapping history passed:\n%s", r)
	}
	if len(r.Verdicts) != 5 {
		t.Errorf("%d verdicts without a failover bound, want 5", len(r.Verdicts))
	}
	s := r.String()
	for _, want := range []string{
		"unfenced", NameValidTerms + " FAILED (seed 777) at +950.000ms",
		"+950.000ms  elected b pid 0 token 2", "+10.000ms  elected a", "fault pause a",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, `"late"`) {
		t.Errorf("report shows a write 1.8 s outside the window:\n%s", s)
	}
}

func TestSaveLoadHistory(t *testing.T) {
	h := goodHistory()
	h.Killed = map[string]int64{"a": at(5)}
	path := filepath.Join(t.TempDir(), "history.json")
	if err := SaveHistory(path, h); err != nil {
		t.Fatal(err)
	}
	got, err := LoadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip changed the history:\n got %+v\nwant %+v", got, h)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHistory(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("truncated file: err = %v, want one naming %s", err, path)
	}
	if _, err := LoadHistory(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file loaded")
	}
	if err := SaveHistory(filepath.Join(t.TempDir(), "no", "dir.json"), h); err == nil {
		t.Error("saved into a missing directory")
	}
}

// TestCheckValidTermsOperatorGrace: an overlap of a few milliseconds as
// another client removes the leader's key passes within the grace, and is
// reported; a longer one, or one with no operator fault, does not.
func TestCheckValidTermsOperatorGrace(t *testing.T) {
	h := func(demotedMs int64, faults ...Fault) *History {
		return &History{Start: t0, End: at(3000), Faults: faults, Events: []Event{
			elected("a", 1, 0, 900),
			elected("b", 2, 502, 1500), // a's Term is valid until demotedMs
			demoted("a", 1, demotedMs),
			demoted("b", 2, 1400),
		}}
	}
	op := Fault{Kind: "operator", Target: "delete the leader's key", Start: at(500), End: at(501)}
	if v := CheckValidTermsGrace(h(504, op), 100*time.Millisecond); !v.OK || !strings.Contains(v.Detail, "1 overlapped") || !strings.Contains(v.Detail, "2.000ms") {
		t.Errorf("a 2 ms overlap under an operator fault: OK=%v %s", v.OK, v.Detail)
	}
	if v := CheckValidTermsGrace(h(504), 100*time.Millisecond); v.OK {
		t.Errorf("a 2 ms overlap with no operator fault passed: %s", v.Detail)
	}
	if v := CheckValidTermsGrace(h(800, op), 100*time.Millisecond); v.OK {
		t.Errorf("a 298 ms overlap under an operator fault passed: %s", v.Detail)
	}
	if v := CheckValidTerms(h(504, op)); v.OK {
		t.Errorf("CheckValidTerms (no grace) let an overlap pass: %s", v.Detail)
	}
	// The old leader learns of the removal from the event of the
	// operator's request, so the grace counts from the store's answer to
	// it: a leader that ended 130 ms after the request was sent but 30 ms
	// after its answer passes; one that ended 130 ms after the answer, or
	// 130 ms after a request with no answer timed, does not.
	slow := Fault{Kind: "operator", Target: "revoke the leader's lease", Start: at(400), End: at(501), Acked: at(500)}
	if v := CheckValidTermsGrace(h(530, slow), 100*time.Millisecond); !v.OK {
		t.Errorf("a 28 ms overlap 30 ms after the operator's request was answered: %s", v.Detail)
	}
	slow.Acked = at(400)
	if v := CheckValidTermsGrace(h(530, slow), 100*time.Millisecond); v.OK {
		t.Errorf("an old leader that ended 130 ms after the operator's request was answered passed: %s", v.Detail)
	}
	slow.Acked = 0
	if v := CheckValidTermsGrace(h(530, slow), 100*time.Millisecond); v.OK {
		t.Errorf("an old leader that ended 130 ms after the operator's request, no answer timed, passed: %s", v.Detail)
	}
	// A successor elected before the operator's request was sent is not
	// the operator's doing.
	early := Fault{Kind: "operator", Target: "revoke the leader's lease", Start: at(503), End: at(504), Acked: at(504)}
	if v := CheckValidTermsGrace(h(504, early), 100*time.Millisecond); v.OK {
		t.Errorf("a successor elected before the operator's request passed: %s", v.Detail)
	}
}

// TestCheckValidTermsOperatorThenKill: another client removes the
// leader's key and the leader's process is killed before it could see the
// removal; its Term, with no Demoted, runs to its deadline. The successor
// elected on the removal is the operator's doing: the old Term counts as
// ending at the kill, within the grace of the removal's answer. A kill
// past the grace, or a successor with no operator fault, still fails.
func TestCheckValidTermsOperatorThenKill(t *testing.T) {
	h := func(killMs int64, faults ...Fault) *History {
		return &History{Start: t0, End: at(3000), Faults: faults,
			Events: []Event{
				elected("a", 1, 0, 1500), // no Demoted: killed
				elected("b", 2, 503, 1800),
				demoted("b", 2, 1700),
			},
			Killed: map[string]int64{"a": at(killMs)}}
	}
	op := Fault{Kind: "operator", Target: "delete the leader key", Start: at(500), End: at(502), Acked: at(502)}
	if v := CheckValidTermsGrace(h(502, op), 100*time.Millisecond); !v.OK {
		t.Errorf("a leader killed as another client removed its key: %s", v.Detail)
	}
	if v := CheckValidTermsGrace(h(700, op), 100*time.Millisecond); v.OK {
		t.Errorf("a leader killed 198 ms after its key's removal was answered passed: %s", v.Detail)
	}
	if v := CheckValidTermsGrace(h(502), 100*time.Millisecond); v.OK {
		t.Errorf("a successor elected before a killed leader's deadline, no operator fault, passed: %s", v.Detail)
	}
}

// A Term reported Ended (by its lease clock, before a hand-over) is over
// then, even if its process is killed before OnDemoted: a successor elected
// after the Ended does not overlap it; one elected before does.
func TestCheckValidTermsEndedBeforeKill(t *testing.T) {
	base := func(bElectedMs int64) *History {
		ended := Event{Kind: Ended, Candidate: "a", Token: 1, At: at(340)}
		return &History{Start: t0, End: at(3000),
			Events: []Event{
				elected("a", 1, 0, 500),
				renewed("a", 1, 300, 800),
				ended, // a hands over, then is killed: no Demoted
				elected("b", 2, bElectedMs, bElectedMs+500),
				demoted("b", 2, bElectedMs+400),
			},
			Killed: map[string]int64{"a": at(350)},
		}
	}
	if v := CheckValidTerms(base(345)); !v.OK {
		t.Errorf("b elected after a's Term ended judged invalid: %s", v.Detail)
	}
	if v := CheckValidTerms(base(330)); v.OK {
		t.Errorf("b elected before a's Term ended judged valid")
	}
	if v := CheckCallbacks(base(345)); !v.OK {
		t.Errorf("an Ended event broke the callback check: %s", v.Detail)
	}
}
