package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/rig/zktest"
)

// storyLine is one event line of the demo's output.
type storyLine struct {
	who, kind, detail string
}

var eventLine = regexp.MustCompile(`^\s*\d+\.\d{3}s  (\S+)\s+(\S+)\s+(.*)$`)

func parseStory(out string) []storyLine {
	var ls []storyLine
	for _, l := range strings.Split(out, "\n") {
		if m := eventLine.FindStringSubmatch(l); m != nil {
			ls = append(ls, storyLine{m[1], m[2], m[3]})
		}
	}
	return ls
}

var tokenRE = regexp.MustCompile(`token (\d+)`)

func tokenOf(t *testing.T, l storyLine) uint64 {
	t.Helper()
	m := tokenRE.FindStringSubmatch(l.detail)
	if m == nil {
		t.Fatalf("no token in %+v", l)
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkStory checks what every run of the story must show, in this order:
// an election, a resignation and the handover it causes, a crash and the
// failover after the lease, (a recovery,) the shutdown and the summary.
func checkStory(t *testing.T, out string, recovery bool) {
	t.Helper()
	if strings.Contains(out, "\x1b[") {
		t.Errorf("ANSI colours in output that is not a terminal")
	}
	lines := parseStory(out)
	var elected []storyLine
	for _, l := range lines {
		if l.kind == evElected {
			elected = append(elected, l)
		}
	}
	// Exactly three leaderships: the first, the handover's, the failover's
	// (and, on a backend that can transfer, the transfer's and the
	// preemption's); their tokens strictly increase.
	transfers := strings.Contains(out, "transfer: the leader hands its leadership")
	want := 3
	if transfers {
		want = 5
	}
	if len(elected) != want {
		t.Fatalf("%d elected lines, want %d:\n%s", len(elected), want, out)
	}
	for i := 1; i < len(elected); i++ {
		if tokenOf(t, elected[i]) <= tokenOf(t, elected[i-1]) {
			t.Errorf("tokens do not increase: %v then %v", elected[i-1], elected[i])
		}
	}
	first, second, third := elected[0], elected[1], elected[2]
	if second.who == first.who || third.who == second.who {
		t.Errorf("leaders %s, %s, %s: the handover and the failover must change the leader", first.who, second.who, third.who)
	}

	// The story's own actions wait for the events they follow, so these
	// come in this order whatever the scheduling.
	type step struct {
		name  string
		match func(storyLine) bool
	}
	is := func(who, kind, detail string) func(storyLine) bool {
		return func(l storyLine) bool {
			return (who == "" || l.who == who) && l.kind == kind && strings.Contains(l.detail, detail)
		}
	}
	steps := []step{
		{"campaign", is("", evCampaign, "Campaign")},
		{"first elected", is(first.who, evElected, "(OnElected)")},
		{"resign", is(first.who, evResign, "Resign")},
		{"second elected", is(second.who, evElected, "(OnElected)")},
		{"handover", is(second.who, evHandover, first.who+" → "+second.who)},
		{"crash", is(second.who, evCrash, "no Resign")},
		{"third elected", is(third.who, evElected, "(OnElected)")},
		{"failover", is(third.who, evFailover, second.who+" → "+third.who)},
	}
	if recovery {
		steps = append(steps,
			step{"recover", is(second.who, evRecover, "back up")},
			step{"follows again", is("*", evLeader, third.who+" (token")})
	}
	last := third
	if transfers {
		fourth, fifth := elected[3], elected[4]
		steps = append(steps,
			step{"transfer", is(third.who, evTransfer, "Transfer to "+fourth.who)},
			step{"fourth elected", is(fourth.who, evElected, "(OnElected)")},
			step{"transfer handover", is(fourth.who, evHandover, third.who+" → "+fourth.who)},
			step{"preempt", is(fifth.who, evPreempt, "priority 10")},
			step{"fifth elected", is(fifth.who, evElected, "(OnElected)")},
			step{"preemption handover", is(fifth.who, evHandover, fourth.who+" → "+fifth.who)})
		last = fifth
	}
	steps = append(steps,
		step{"shutdown", is("-", evShutdown, "the followers' Runs are canceled")},
		step{"demoted at shutdown", is(last.who, evDemoted, "resigned")},
		step{"closed", is("-", evShutdown, "every Run returned")})
	at := map[string]int{} // step name → line index
	i := 0
	for j, l := range lines {
		if i < len(steps) && steps[i].match(l) {
			at[steps[i].name] = j
			i++
		}
	}
	if i < len(steps) {
		t.Fatalf("the story lacks %q (after %d steps in order):\n%s", steps[i].name, i, out)
	}
	// OnDemoted comes from each candidate's own Run, after its term ended:
	// after the action that ended it, before its Run returned — not
	// ordered against the next leader's OnElected, which another
	// candidate's Run calls (Events.Ended is: a hand-over waits
	// for it).
	type demotion struct {
		name, after string
		match       func(storyLine) bool
	}
	demoted := []demotion{
		{"demoted: resigned", "resign", is(first.who, evDemoted, "resigned (OnDemoted)")},
		{"demoted: lease expired or session lost", "crash", func(l storyLine) bool {
			return is(second.who, evDemoted, "lease expired")(l) || is(second.who, evDemoted, "session lost")(l)
		}},
	}
	if transfers {
		demoted = append(demoted,
			demotion{"demoted: transferred", "transfer", is(third.who, evDemoted, "transferred (OnDemoted)")},
			demotion{"demoted: preempted", "preempt", is(elected[3].who, evDemoted, "preempted (OnDemoted)")})
	}
	for _, d := range demoted {
		j := slices.IndexFunc(lines, d.match)
		if j < at[d.after] || j > at["closed"] {
			t.Errorf("%q at line %d, want it between %q (%d) and the end of the shutdown (%d):\n%s",
				d.name, j, d.after, at[d.after], at["closed"], out)
		}
	}
	for _, l := range lines {
		if l.kind == evFailover && strings.Contains(l.detail, "BEFORE") {
			t.Errorf("a leader was elected before the crashed leader's lease ended: %v", l)
		}
	}

	// The OnLeader lines name only real leaderships.
	tokens := map[string]bool{}
	for _, l := range elected {
		tokens[l.who+" (token "+strconv.FormatUint(tokenOf(t, l), 10)+")"] = true
	}
	for _, l := range lines {
		if l.kind != evLeader {
			continue
		}
		what, _, _ := strings.Cut(l.detail, ", as OnLeader")
		if what != "none" && !tokens[what] {
			t.Errorf("OnLeader line names %q, which no OnElected announced", what)
		}
	}

	_, summary, ok := strings.Cut(out, "\nsummary\n")
	if !ok {
		t.Fatalf("no summary:\n%s", out)
	}
	tok := func(l storyLine) string { return strconv.FormatUint(tokenOf(t, l), 10) }
	rows := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  election +- → ` + first.who + ` +- → ` + tok(first) + ` +\S+ +Run to OnElected$`),
		regexp.MustCompile(`(?m)^  handover +` + first.who + ` → ` + second.who + ` +` + tok(first) + ` → ` + tok(second) + ` +\S+ +Resign to OnElected$`),
		regexp.MustCompile(`(?m)^  failover +` + second.who + ` → ` + third.who + ` +` + tok(second) + ` → ` + tok(third) + ` +\S+ +crash to OnElected \(lease TTL 1s\)$`),
	}
	if transfers {
		fourth, fifth := elected[3], elected[4]
		rows = append(rows,
			regexp.MustCompile(`(?m)^  transfer +`+third.who+` → `+fourth.who+` +`+tok(third)+` → `+tok(fourth)+` +\S+ +Transfer to OnElected$`),
			regexp.MustCompile(`(?m)^  preemption +`+fourth.who+` → `+fifth.who+` +`+tok(fourth)+` → `+tok(fifth)+` +\S+ +joining to OnElected \(hold-off 500ms\)$`))
	}
	if recovery {
		rows = append(rows, regexp.MustCompile(`(?m)^  recovery +`+second.who+` back, `+third.who+` leads on +`+tok(third)+` kept +\S+ +Recover until`))
	} else if strings.Contains(summary, "recovery") {
		t.Errorf("a recovery in the summary of a backend that cannot recover:\n%s", summary)
	}
	for _, re := range rows {
		if !re.MatchString(summary) {
			t.Errorf("summary lacks a row matching %s:\n%s", re, summary)
		}
	}
}

// headingRE matches a section heading of the story: "── 4. transfer: …".
var headingRE = regexp.MustCompile(`(?m)^── (\d+)\. (.*)$`)

// checkSections checks that the story's numbered headings are the
// sections the help lists for backend, in its numbering.
func checkSections(t *testing.T, out, backend string) {
	t.Helper()
	// How each section's heading begins, after its number.
	starts := map[string]*regexp.Regexp{
		"campaign":   regexp.MustCompile(`^\d+ candidates campaign`),
		"handover":   regexp.MustCompile(`^graceful handover:`),
		"crash":      regexp.MustCompile(`^crash:`),
		"recovery":   regexp.MustCompile(`^recovery:`),
		"transfer":   regexp.MustCompile(`^transfer:`),
		"preemption": regexp.MustCompile(`^preemption:`),
		"shutdown":   regexp.MustCompile(`^shutdown$`),
	}
	want := findDemoBackend(backend).sections()
	got := headingRE.FindAllStringSubmatch(out, -1)
	if len(got) != len(want) {
		t.Fatalf("%d section headings, the help lists %d for %s (%v):\n%s", len(got), len(want), backend, want, out)
	}
	for i, m := range got {
		if m[1] != strconv.Itoa(i+1) || !starts[want[i]].MatchString(m[2]) {
			t.Errorf("heading %q; the help lists %d. %s for %s", m[0], i+1, want[i], backend)
		}
	}
	_, help, _ := elect(t, "demo", "--help")
	var items []string
	for i, sec := range want {
		items = append(items, strconv.Itoa(i+1)+". "+sec)
	}
	if flat := strings.Join(strings.Fields(help), " "); !strings.Contains(flat, strings.Join(items, ", ")) {
		t.Errorf("the help does not number %s's sections %s:\n%s", backend, strings.Join(items, ", "), help)
	}
}

func TestDemoInmem(t *testing.T) {
	for _, alg := range demoAlgorithms() {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := elect(t, "demo", "--backend", "inmem", "--algorithm", alg, "--short")
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
			}
			if !strings.Contains(out, "5 candidates on the inmem backend ("+alg+" algorithm, lease TTL 1s") {
				t.Errorf("header:\n%s", out)
			}
			checkStory(t, out, true)
			checkSections(t, out, "inmem")
		})
	}
}

// TestDemoEtcd runs the README's first command, on the embedded etcd.
func TestDemoEtcd(t *testing.T) {
	t.Parallel()
	code, out, errOut := elect(t, "demo", "--short")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "5 candidates on the etcd backend (an embedded etcd at http://127.0.0.1:") {
		t.Errorf("header:\n%s", out)
	}
	checkStory(t, out, false)
	checkSections(t, out, "etcd")
}

// noRecoverBackend hides the inmem backend's Recover, as a backend without
// one (etcd) would be: the story skips the recovery.
type noRecoverBackend struct{ b demoBackend }

func (n noRecoverBackend) Name() string     { return "norecover" }
func (n noRecoverBackend) Describe() string { return n.b.Describe() }
func (n noRecoverBackend) Candidate(ctx context.Context, id string, opts ...election.Option) (election.Elector, error) {
	return n.b.Candidate(ctx, id, opts...)
}
func (n noRecoverBackend) Crash(e election.Elector) error { return n.b.Crash(e) }
func (n noRecoverBackend) Close() error                   { return n.b.Close() }

// TestDemoOtherBackend runs the story on a backend given by one open
// function, the way the etcd variant will plug in.
func TestDemoOtherBackend(t *testing.T) {
	t.Parallel()
	entry := &demoBackendEntry{name: "norecover", open: func(ctx context.Context, cfg demoConfig) (demoBackend, error) {
		b, err := openInmem(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return noRecoverBackend{b}, nil
	}}
	var out bytes.Buffer
	p := &demoPlan{backend: entry, cfg: demoConfig{Algorithm: "ring", TTL: time.Second}, candidates: 3, short: true}
	if err := runDemo(context.Background(), &out, p); err != nil {
		t.Fatalf("runDemo: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "3 candidates on the norecover backend") {
		t.Errorf("header:\n%s", out.String())
	}
	checkStory(t, out.String(), false)
}

// TestDemoEnvironment configures the demo from the environment only.
func TestDemoEnvironment(t *testing.T) {
	t.Setenv("ELECTION_BACKEND", "inmem")
	t.Setenv("ELECTION_CANDIDATES", "3")
	t.Setenv("ELECTION_SHORT", "true")
	code, out, errOut := elect(t, "demo")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "3 candidates on the inmem backend (ring algorithm, lease TTL 1s") {
		t.Errorf("header:\n%s", out)
	}
	checkStory(t, out, true)
	checkSections(t, out, "inmem")
}

// TestDemoInterrupted: a canceled story still shuts everything down (the
// goroutine check of TestMain would catch what it left running).
func TestDemoInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	p := &demoPlan{backend: findDemoBackend("inmem"), cfg: demoConfig{Algorithm: "ring", TTL: time.Second}, candidates: 2, short: true}
	err := runDemo(ctx, &out, p)
	if err == nil || err.Error() != "interrupted" {
		t.Fatalf("runDemo with a canceled context: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "every Run returned; candidates and backend closed") {
		t.Errorf("no clean shutdown:\n%s", out.String())
	}
}

func TestColourOnlyOnTerminals(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file is not a terminal")
	}
}

// TestDemoZK runs the story on a real ZooKeeper server, as a user with
// their own ZooKeeper would: elect demo --backend zk --servers ….
func TestDemoZK(t *testing.T) {
	t.Parallel()
	srv := zktest.Standalone(t)
	code, out, errOut := elect(t, "demo", "--short", "--backend", "zk", "--servers", srv.Addr)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "5 candidates on the zk backend (ZooKeeper at "+srv.Addr) {
		t.Errorf("header:\n%s", out)
	}
	checkStory(t, out, false)
	checkSections(t, out, "zk")
}
