package main

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// runEnv, when set, makes the test binary run the quickstart's main with
// the arguments it was given: the test starts the replicas as child
// processes of its own binary, so that they run the program the README
// shows, built as the test is (with the race detector under make test).
const runEnv = "QUICKSTART_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// patience bounds every wait of the test: an election on an embedded etcd
// hands over in milliseconds, but the machine may be loaded.
const patience = 30 * time.Second

// handOver bounds the time from a leader's step-down to its successor's
// leadership. A step-down that failed would leave the leader's key to its
// lease, and the successor would wait for the TTL (10 s) to pass.
const handOver = 5 * time.Second

// A line is one line of a replica's log, stamped when the test read it.
type line struct {
	at   time.Time
	text string
}

// replica is one running copy of the quickstart, a child process.
type replica struct {
	id     string
	cmd    *exec.Cmd
	lines  chan line  // its log, closed at the end of its output
	exited chan error // its exit status, once
	seen   []line     // the lines the test has read
}

func start(t *testing.T, id string, endpoints []string) *replica {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-id", id, "-jobs", "3")
	cmd.Env = append(os.Environ(), runEnv+"=1", "ETCD_ENDPOINTS="+strings.Join(endpoints, ","))
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting replica %s: %v", id, err)
	}
	w.Close()
	rp := &replica{id: id, cmd: cmd, lines: make(chan line, 1024), exited: make(chan error, 1)}
	go func() {
		defer close(rp.lines)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			rp.lines <- line{time.Now(), sc.Text()}
		}
	}()
	go func() { rp.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-rp.exited:
			rp.exited <- err
		default:
			_ = cmd.Process.Kill() // by the PID this test started
			<-rp.exited
		}
		if t.Failed() {
			var out strings.Builder
			for _, l := range rp.seen {
				out.WriteString(l.text + "\n")
			}
			for l := range rp.lines {
				out.WriteString(l.text + "\n")
			}
			t.Logf("replica %s's output:\n%s", id, out.String())
		}
	})
	return rp
}

var leads = regexp.MustCompile(`(\S+) leads, token (\d+)$`)

// waitLead reads rp's log until it reports a leadership with a token above
// after, and returns that token and when the test read the line.
func (rp *replica) waitLead(t *testing.T, after uint64) (uint64, time.Time) {
	t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case l, ok := <-rp.lines:
			if !ok {
				t.Fatalf("replica %s ended its output before leading", rp.id)
			}
			rp.seen = append(rp.seen, l)
			m := leads.FindStringSubmatch(l.text)
			if m == nil || m[1] != rp.id {
				continue
			}
			tok, err := strconv.ParseUint(m[2], 10, 64)
			if err != nil {
				t.Fatalf("replica %s: %q: %v", rp.id, l.text, err)
			}
			if tok > after {
				return tok, l.at
			}
		case <-deadline:
			t.Fatalf("replica %s did not lead within %v", rp.id, patience)
		}
	}
}

// steppedDown returns when rp last reported stepping down before the
// instant before. It reads rp's log up to a line read after that instant:
// the replicas take turns, so one comes.
func (rp *replica) steppedDown(t *testing.T, before time.Time) time.Time {
	t.Helper()
	deadline := time.After(patience)
	for len(rp.seen) == 0 || !rp.seen[len(rp.seen)-1].at.After(before) {
		select {
		case l, ok := <-rp.lines:
			if !ok {
				t.Fatalf("replica %s ended its output", rp.id)
			}
			rp.seen = append(rp.seen, l)
		case <-deadline:
			t.Fatalf("replica %s wrote nothing within %v", rp.id, patience)
		}
	}
	for i := len(rp.seen) - 1; i >= 0; i-- {
		l := rp.seen[i]
		if !l.at.After(before) && strings.Contains(l.text, rp.id+" steps down after 3 jobs") {
			return l.at
		}
	}
	t.Fatalf("replica %s did not step down before its successor led", rp.id)
	return time.Time{}
}

// stop sends rp SIGTERM and waits for it to exit with status 0.
func (rp *replica) stop(t *testing.T) {
	t.Helper()
	if err := rp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to replica %s: %v", rp.id, err)
	}
	select {
	case err := <-rp.exited:
		rp.exited <- err // for the cleanup
		if err != nil {
			t.Errorf("replica %s exited after SIGTERM: %v", rp.id, err)
		}
	case <-time.After(patience):
		t.Fatalf("replica %s did not exit within %v of SIGTERM", rp.id, patience)
	}
	// Its whole log: leaderships, step-downs and demotions, and nothing
	// else (a step-down with OnElected's ctx returns nil, and neither the
	// Elector nor the etcd client has anything to say about it).
	for l := range rp.lines {
		rp.seen = append(rp.seen, l)
	}
	for _, l := range rp.seen {
		if !expected.MatchString(l.text) {
			t.Errorf("replica %s logged %q", rp.id, l.text)
		}
	}
}

var expected = regexp.MustCompile(`(\S+ leads, token \d+|job \d+ written with token \d+|\S+ steps down after \d+ jobs|\S+ no longer leads: election: resigned)$`)

// Two replicas of the quickstart on an embedded etcd: the first leads; each
// leader steps down after three jobs and the other, waiting, takes over at
// once with a larger token; on SIGTERM both exit with status 0.
func TestQuickstart(t *testing.T) {
	eps := etcdtest.New(t, embedetcd.Config{}).Endpoints()
	a := start(t, "replica-a", eps)
	tokA, _ := a.waitLead(t, 0)
	b := start(t, "replica-b", eps)
	tokB, atB := b.waitLead(t, tokA)
	_, atA := a.waitLead(t, tokB) // b steps down in turn
	if gap := atB.Sub(a.steppedDown(t, atB)); gap > handOver {
		t.Errorf("replica-b led %v after replica-a stepped down, want within %v", gap, handOver)
	}
	if gap := atA.Sub(b.steppedDown(t, atA)); gap > handOver {
		t.Errorf("replica-a led %v after replica-b stepped down, want within %v", gap, handOver)
	}
	a.stop(t)
	b.stop(t)
}
