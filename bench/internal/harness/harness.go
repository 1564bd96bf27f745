// Package harness runs the benchmark scenarios — handover, transfer, crash
// failover, herd, scale, shards, burst, in-process, postgres, kube — against real servers
// it starts itself, for this module's backends and the peers of the
// registry (libs), interleaved in the same run, and writes the report:
// report.md, samples.json and distributions.svg.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/bench/internal/servers"
)

// Scenarios lists every scenario, in the order they run.
var Scenarios = []string{"handover", "transfer", "crash", "herd", "scale", "shards", "burst", "inprocess", "postgres", "kube"}

// Config is one run of the harness.
type Config struct {
	// Short runs the smoke version: tiny sample counts and sizes, every
	// scenario's code path once.
	Short bool
	// Scenarios to run (nil: all).
	Scenarios []string
	// Samples, if positive, is the number of handover samples per regime
	// (and caps the crash samples).
	Samples int
	// Libs, if not empty, keeps the libraries whose names contain one of
	// its comma-separated terms (the floors always run).
	Libs string
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Command is the command line, for the report.
	Command string
	// Shards, if set, is the number of elections of the shards scenario.
	Shards int
	// Burst, if set, is the number of elections of the burst scenario.
	Burst int
	// BurstCap, if set, is how long the burst scenario waits for every
	// election to lead before it reports how many did.
	BurstCap time.Duration
	// ScaleNs, if set, replaces the scale scenario's sizes.
	ScaleNs []int
	// HeapProfile, if set, is a path prefix: the burst scenario writes the
	// heap profile it measures an idle election's heap on to
	// HeapProfile + "-" + the library's slug + ".pprof".
	HeapProfile string
	// Entries overrides the registry (nil: libs.All()), for tests.
	Entries []libs.Entry
}

// sizes are the sample counts and sizes of one mode.
type sizes struct {
	churn, settled int           // handover samples per regime
	budget         time.Duration // per library and regime: stop sampling after this much time
	crash          int           // crash samples per library and TTL
	crashTTLs      []time.Duration
	herdN          int
	herdHandovers  int
	scaleNs        []int
	steadyWindow   time.Duration
	scalePatience  time.Duration // per library and size: report what registered by then
	inmemSamples   int
	ringN          int
	bullyN         int
}

func (c Config) sizes() sizes {
	s := sizes{
		churn: 100, settled: 100, budget: 12 * time.Second,
		crash: 20, crashTTLs: []time.Duration{2 * time.Second, 10 * time.Second},
		herdN: 500, herdHandovers: 5,
		scaleNs: []int{1000, 10000}, scalePatience: 40 * time.Second,
		inmemSamples: 200, ringN: 1_000_000, bullyN: 512,
	}
	if c.Short {
		s = sizes{
			churn: 3, settled: 2, budget: 2 * time.Second,
			crash: 1, crashTTLs: []time.Duration{2 * time.Second},
			herdN: 12, herdHandovers: 1,
			scaleNs: []int{20}, steadyWindow: 500 * time.Millisecond, scalePatience: 30 * time.Second,
			inmemSamples: 5, ringN: 1000, bullyN: 50,
		}
	}
	if len(c.ScaleNs) > 0 {
		s.scaleNs = c.ScaleNs
	}
	if c.Samples > 0 {
		s.churn, s.settled = c.Samples, c.Samples
		s.crash = min(s.crash, c.Samples)
	}
	return s
}

// target is one store deployment the scenarios run against.
type target struct {
	key     string // "etcd-1"
	title   string // "etcd, 1 member"
	store   libs.Store
	members int
}

var (
	etcd1 = target{"etcd-1", "etcd, 1 member", libs.Etcd, 1}
	etcd3 = target{"etcd-3", "etcd, 3 members", libs.Etcd, 3}
	zk1   = target{"zk-1", "ZooKeeper, standalone", libs.ZK, 1}
	zk3   = target{"zk-3", "ZooKeeper, 3 nodes", libs.ZK, 3}
)

// run is the state of one harness run.
type run struct {
	cfg     Config
	sz      sizes
	entries []libs.Entry
	rep     *Report

	mu      sync.Mutex
	etcd    map[int]*servers.Etcd
	zk      map[int]*servers.ZK
	private *servers.Etcd // the scale scenario's etcd of the moment
	privZK  *servers.ZK   // the burst scenario's ZooKeeper of the moment
	started time.Time
}

// Run runs the scenarios of cfg and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	for _, s := range cfg.Scenarios {
		if !slices.Contains(Scenarios, s) {
			return nil, fmt.Errorf("harness: no scenario %q (known: %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	if len(cfg.Scenarios) == 0 {
		cfg.Scenarios = Scenarios
	}
	entries := cfg.Entries
	if entries == nil {
		entries = libs.All()
	}
	r := &run{cfg: cfg, sz: cfg.sizes(), etcd: map[int]*servers.Etcd{}, zk: map[int]*servers.ZK{}, started: time.Now()}
	r.rep = newReport(cfg)
	for _, m := range libs.Missing(entries) {
		r.rep.note("NOT MEASURED: " + m)
	}
	r.entries = libs.Runnable(libs.Filter(entries, cfg.Libs))
	if cfg.Libs != "" {
		r.rep.note(fmt.Sprintf("-libs %q: only %s measured", cfg.Libs, names(r.entries)))
	}
	defer r.closeServers()
	var errs []error
	for _, s := range cfg.Scenarios {
		t0 := time.Now()
		r.logf("scenario %s", s)
		var err error
		switch s {
		case "handover":
			err = r.handover(ctx)
		case "transfer":
			err = r.transfer(ctx)
		case "crash":
			err = r.crash(ctx)
		case "herd":
			err = r.herd(ctx)
		case "scale":
			err = r.scale(ctx)
		case "shards":
			err = r.shards(ctx)
		case "burst":
			err = r.burst(ctx)
		case "inprocess":
			err = r.inprocess(ctx)
		case "postgres":
			err = r.postgres(ctx)
		case "kube":
			err = r.kube(ctx)
		}
		if err != nil {
			r.rep.note(fmt.Sprintf("scenario %s failed: %v", s, err))
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
		}
		r.rep.Durations = append(r.rep.Durations, ScenarioTime{s, time.Since(t0).Round(time.Millisecond).String()})
		r.logf("scenario %s done in %v", s, time.Since(t0).Round(time.Millisecond))
		if ctx.Err() != nil {
			break
		}
	}
	r.rep.Elapsed = time.Since(r.started).Round(time.Second).String()
	r.rep.evaluate()
	return r.rep, errors.Join(errs...)
}

func names(es []libs.Entry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return strings.Join(out, ", ")
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "%7.1fs  %s\n", time.Since(r.started).Seconds(), fmt.Sprintf(format, args...))
	}
}

// libsOf returns the runnable entries for store with one of roles.
func (r *run) libsOf(store libs.Store, roles ...libs.Role) []libs.Entry {
	var out []libs.Entry
	for _, e := range r.entries {
		if e.Store == store && slices.Contains(roles, e.Role) {
			out = append(out, e)
		}
	}
	return out
}

// env returns the servers of t, starting them on first use.
func (r *run) env(t target) (libs.Env, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.store == libs.Etcd {
		e, ok := r.etcd[t.members]
		if !ok {
			r.logf("starting etcd, %d member(s)", t.members)
			var err error
			if e, err = servers.StartEtcd(t.members); err != nil {
				return libs.Env{}, err
			}
			r.etcd[t.members] = e
		}
		return libs.Env{Endpoints: e.Endpoints, Short: r.cfg.Short}, nil
	}
	z, ok := r.zk[t.members]
	if !ok {
		if err := servers.ZKAvailable(); err != nil {
			return libs.Env{}, err
		}
		r.logf("starting ZooKeeper, %d server(s)", t.members)
		var err error
		if z, err = servers.StartZK(t.members); err != nil {
			return libs.Env{}, err
		}
		r.zk[t.members] = z
	}
	return libs.Env{Servers: z.Servers, Short: r.cfg.Short}, nil
}

// privateServer starts servers of t for one case; stop closes them.
func (r *run) privateServer(t target) (libs.Env, func(), error) {
	if t.store == libs.Etcd {
		e, err := servers.StartEtcd(t.members)
		if err != nil {
			return libs.Env{}, nil, err
		}
		r.mu.Lock()
		r.private = e
		r.mu.Unlock()
		return libs.Env{Endpoints: e.Endpoints, Short: r.cfg.Short}, func() {
			r.mu.Lock()
			r.private = nil
			r.mu.Unlock()
			_ = e.Close()
		}, nil
	}
	z, err := servers.StartZK(t.members)
	if err != nil {
		return libs.Env{}, nil, err
	}
	r.mu.Lock()
	r.privZK = z
	r.mu.Unlock()
	return libs.Env{Servers: z.Servers, Short: r.cfg.Short}, func() {
		r.mu.Lock()
		r.privZK = nil
		r.mu.Unlock()
		_ = z.Close()
	}, nil
}

// serverRSS returns the resident memory of the private etcd child (0 when
// there is none).
func (r *run) serverRSS() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.private == nil {
		return 0
	}
	rss, _ := r.private.RSS()
	return rss
}

// zkRSS returns the resident memory of the private ZooKeeper servers' Java
// processes, summed (0 when there are none).
func (r *run) zkRSS() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.privZK == nil {
		return 0
	}
	rss, _ := r.privZK.RSS()
	return rss
}

func (r *run) closeServers() {
	for _, e := range r.etcd {
		_ = e.Close()
	}
	for _, z := range r.zk {
		_ = z.Close()
	}
}

// Hostname-free description of the machine, for the report.
func machine() string {
	var cpu string
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.Index(l, ":"); i >= 0 {
					cpu = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	var mem string
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d cores, %s", cpu, numCPU(), mem)
}
