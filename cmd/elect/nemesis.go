package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/cmd/internal/nemesis/harness"
)

// candidateCommand is the hidden command the nemesis harness runs as each
// store candidate's process: not in the command list, not for users.
const candidateCommand = "nemesis-candidate"

func nemesisCommand() *command {
	return &command{
		name:     "nemesis",
		summary:  "run an election under injected faults and check its safety (Jepsen style)",
		synopsis: "--backend etcd|zk|postgres|kube|inmem [--seed N] [--duration D] [flags]",
		about: `Runs candidates against a real store — a 3-member etcd cluster in this
process, a 3-server ZooKeeper ensemble (Debian's zookeeper package), a
PostgreSQL 15 server (Debian's postgresql-15), a kube-apiserver (built
from k8s.io/kubernetes by make kube-apiserver, named by KUBE_APISERVER)
over an etcd in this process, or backend/inmem's Zab in process — while a nemesis picked from --seed kills,
pauses (SIGSTOP past the TTL) and cuts off the leader, kills or cuts off
the store's own leader, expires a waiter's session, writes garbage under
the election prefix, and acts as another client of the store would (deletes
the leader's key or node or the whole prefix, revokes its lease, takes the
candidates' permission away for a while). Each leader writes to a fenced register with its token
while its Term is valid. At the end the history is checked: the register's
linearizability, no two valid Terms at one instant (P3), every write
decided in its writer's Term, strictly
increasing tokens (P2), paired callbacks (P5), failover within the bound
after the faults stop (P6).

Prints a summary (faults by kind, leaderships, writes accepted/refused,
verdicts, worst failover). Exit 1 when a checker fails; then --out gets
history.json and the linearizability visualization. --no-fence turns the
register's fencing off: with --faults pause the run must fail (the
negative control).

Clock faults run a candidate's clock (the library's, through
internal/clock; never the machine's) at (1+δ) × real time (clock-fast) or
1/(1+δ) (clock-slow) and cut it off the store past its TTL meanwhile: with
δ below the drift bound ρ no checker may fail; --skew 0.3 --drift 0.1
--margin 1ms --no-fence --faults clock-slow must fail P3 (the clock's
negative control).

Faults: etcd, zk: kill, pause, cut, store-kill, store-cut, expire, garbage,
operator, preempt, transfer, clock-fast, clock-slow, store-partition
(the store's leader member cut off from the others, sometimes with
candidates on its side), store-minority (a member cut off from the others,
candidates on both sides); postgres: kill, pause, cut, store-kill (an
immediate shutdown and a restart), store-cut, expire (a waiter's row
deleted), garbage, operator (the election's row deleted, truncated, its
lease or token rewritten), preempt, transfer, clock-fast, clock-slow;
kube: kill, pause, cut, store-kill (the API server killed and started
again), store-cut, expire (a waiter's candidate record deleted), garbage,
operator (kubectl delete lease, an edit of holderIdentity or renewTime,
the RoleBinding that lets the candidates use Leases deleted and created
again), preempt, transfer, clock-fast, clock-slow; inmem: crash,
partition.`,
		example: `elect nemesis --backend etcd --seed 42 --duration 3m
elect nemesis --backend zk --seed 7 --faults kill,pause --out /tmp/nemesis
elect nemesis --backend etcd --no-fence --faults pause --work 50ms --duration 30s
elect nemesis --backend etcd --faults clock-slow --drift 0.1 --skew 0.3 --margin 1ms --ttl 5s --no-fence`,
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			var (
				backend, faults, out string
				seed                 int
				duration, ttl, work  time.Duration
				gap                  time.Duration
				candidates, overlap  int
				rate, drift, skew    float64
				margin               time.Duration
				noFence, verbose     bool
			)
			f.String(&backend, "backend", "NAME", "etcd", "etcd, zk, postgres, kube or inmem")
			f.Int(&seed, "seed", "N", 1, "seed of the faults, their targets and timing")
			f.Duration(&duration, "duration", "D", time.Minute, "how long faults are injected (a quiet period follows)")
			f.Int(&candidates, "candidates", "N", harness.DefaultCandidates, "candidates campaigning at once")
			f.Duration(&ttl, "ttl", "D", harness.DefaultTTL, "the candidates' lease/session TTL")
			f.Bool(&noFence, "no-fence", false, "the register accepts every write (negative control)")
			f.Duration(&work, "work", "D", harness.DefaultWork, "a leader's work between its validity check and its write")
			f.Duration(&gap, "gap", "D", 0, "the quiet time before each fault is drawn below D (default: TTL/2 to TTL+1s)")
			f.Float(&rate, "rate", "N", 0, "start N faults a minute, overlapping (up to --overlap at once, on targets no other fault holds; a third aimed at the leader); 0: one at a time")
			f.Int(&overlap, "overlap", "N", harness.DefaultOverlap, "with --rate: faults running at once")
			f.Float(&drift, "drift", "RHO", 0, fmt.Sprintf("the candidates' clock-rate bound ρ (WithDrift; default %g)", election.DefaultDrift))
			f.Duration(&margin, "margin", "D", 0, fmt.Sprintf("the candidates' deadline margin (WithMargin; default %v)", election.DefaultMargin))
			f.Float(&skew, "skew", "DELTA", 0, "δ of clock-fast and clock-slow (default: drawn below ρ; at or above ρ with a small --margin: a negative control, P3 must fail)")
			f.String(&faults, "faults", "LIST", "", "comma-separated fault kinds (default: all of the backend's)")
			f.String(&out, "out", "DIR", "", "directory for history.json and the visualization of a failing run (default: a new temporary directory)")
			f.Bool(&verbose, "verbose", false, "print each fault as it is injected")
			return func(ctx context.Context, w io.Writer) error {
				cfg := harness.Config{Backend: backend, Seed: int64(seed), Duration: duration,
					Candidates: candidates, TTL: ttl, Unfenced: noFence, Work: work, Gap: gap, Rate: rate, Overlap: overlap,
					Drift: drift, Margin: margin, Skew: skew}
				if faults != "" {
					for _, k := range strings.Split(faults, ",") {
						cfg.Faults = append(cfg.Faults, strings.TrimSpace(k))
					}
				}
				if verbose {
					cfg.Log = f.stderr
				}
				switch {
				case backend != "etcd" && backend != "zk" && backend != "postgres" && backend != "kube" && backend != "inmem":
					return f.Bad("backend", "must be etcd, zk, postgres, kube or inmem")
				case duration <= 0:
					return f.Bad("duration", "must be positive")
				case candidates < 2 || candidates > 50:
					return f.Bad("candidates", "must be between 2 and 50")
				case ttl < time.Second || ttl > time.Minute:
					return f.Bad("ttl", "must be between 1s and 1m")
				case work <= 0 || work > time.Second:
					return f.Bad("work", "must be between 0 and 1s")
				case gap < 0 || gap > time.Minute:
					return f.Bad("gap", "must be between 0 and 1m")
				case rate < 0 || rate > 600:
					return f.Bad("rate", "must be between 0 and 600 faults a minute")
				case rate > 0 && backend == "inmem":
					return f.Bad("rate", "overlapping faults are for the store backends (etcd, zk, postgres, kube)")
				case overlap < 1 || overlap > 10:
					return f.Bad("overlap", "must be between 1 and 10")
				case math.IsNaN(drift) || drift < 0 || drift > election.MaxDrift:
					return f.Bad("drift", "must be between 0 (the default) and %g", election.MaxDrift)
				case margin < 0 || margin > ttl/4:
					return f.Bad("margin", "must be between 0 (the default) and a quarter of --ttl")
				case math.IsNaN(skew) || skew < 0 || skew > 1:
					return f.Bad("skew", "must be between 0 (drawn below ρ) and 1")
				}
				kinds := harness.Kinds(backend)
				for _, k := range cfg.Faults {
					if !contains(kinds, k) {
						return f.Bad("faults", "%q is not a fault of %s (%s)", k, backend, strings.Join(kinds, ", "))
					}
				}
				temp := out == ""
				if temp {
					d, err := os.MkdirTemp("", "elect-nemesis-")
					if err != nil {
						return err
					}
					out = d
				} else if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				cfg.Dir = filepath.Join(out, "run")
				cfg.VisPath = filepath.Join(out, "linearizability.html")
				if backend != "inmem" {
					bin, err := os.Executable()
					if err != nil {
						return fmt.Errorf("finding this binary for the candidates: %w", err)
					}
					cfg.Bin = bin
				}
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				hist, rep, err := harness.Run(ctx, cfg)
				if err != nil {
					return err
				}
				fmt.Fprintln(w, rep.String())
				if rep.OK() {
					// Keep files of failing runs only.
					if temp {
						os.RemoveAll(out)
					} else {
						os.RemoveAll(cfg.Dir)
					}
					return nil
				}
				hp := filepath.Join(out, "history.json")
				if err := nemesis.SaveHistory(hp, hist); err != nil {
					return fmt.Errorf("a checker failed (seed %d); saving the history: %w", seed, err)
				}
				return fmt.Errorf("a checker failed (backend %s, seed %d): history in %s, visualization in %s, logs in %s",
					backend, seed, hp, cfg.VisPath, cfg.Dir)
			}
		},
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runCandidate is elect nemesis-candidate: one candidate of a nemesis run,
// as a process of its own. It ends on SIGTERM (resigning) or SIGINT.
func runCandidate(args []string, stderr io.Writer) int {
	f := newFlagSet(candidateCommand)
	f.stderr = stderr
	var (
		cfg       harness.CandidateConfig
		endpoints string
	)
	f.String(&cfg.Backend, "backend", "NAME", "etcd", "etcd, zk, postgres or kube")
	f.String(&endpoints, "endpoints", "LIST", "", "the store's addresses")
	f.String(&cfg.Name, "name", "NAME", "", "the election's name (etcd) or path (zk)")
	f.String(&cfg.ID, "id", "ID", "", "the candidate's ID")
	f.Duration(&cfg.TTL, "ttl", "D", harness.DefaultTTL, "TTL")
	f.String(&cfg.Register, "register", "ADDR", "", "the register's host:port")
	f.Duration(&cfg.Work, "work", "D", harness.DefaultWork, "work between the validity check and the write")
	var prio int
	f.Int(&prio, "priority", "N", 0, "the candidate's priority")
	f.Duration(&cfg.Preempt, "preempt", "D", 0, "while leading, step down for a candidate of higher priority once it has waited D (0: never)")
	f.Float(&cfg.Drift, "drift", "RHO", 0, "the candidate's clock-rate bound ρ (WithDrift; 0: the default)")
	f.Duration(&cfg.Margin, "margin", "D", 0, "the candidate's deadline margin (WithMargin; 0: the default)")
	f.Bool(&cfg.Session, "session", false, "campaign on a session shared with a candidate of a second election (NAME"+harness.SideSuffix+"): an etcd.Session, or one ZooKeeper connection")
	if err := f.Parse(args, func(string) (string, bool) { return "", false }); err != nil {
		fmt.Fprintf(stderr, "elect %s: %v\n", candidateCommand, err)
		return exitUsage
	}
	cfg.Endpoints = strings.Split(endpoints, ",")
	cfg.Priority = int64(prio)
	cfg.Log = stderr
	cfg.Control = os.Stdin // the harness's commands: "rate R" for the clock faults
	// The etcd credentials come from the environment, not the command line
	// that every user of the machine can read.
	cfg.Username, cfg.Password = os.Getenv(harness.EnvUser), os.Getenv(harness.EnvPassword)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := harness.RunCandidate(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "elect %s: %v\n", candidateCommand, err)
		return exitFailure
	}
	return exitOK
}
