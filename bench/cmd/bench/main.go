// Command bench measures this module's election backends against their
// peers on real servers it starts itself — embedded etcd (one member and
// three, in a child process) and ZooKeeper (standalone and a 3-node
// ensemble, the Debian package's server) — and writes report.md,
// samples.json and distributions.svg.
//
//	go run ./cmd/bench -out ../bench-results            # the whole set
//	go run ./cmd/bench -short -out /tmp/smoke           # every path once, tiny samples
//	go run ./cmd/bench -scenarios handover -libs etcd   # a part
//
// Scenarios: handover (release → the next leader, churn and settled
// regimes, beside the store's delete → watch-event floor), crash (the
// leader's connection goes dark → the next leader, TTL 2 s and 10 s), herd
// (500 waiting candidates: how many one handover wakes, and the requests it
// causes, ours against the naive everyone-watches-the-key election), scale
// (1,000 and 10,000 candidates: registration time, steady request rate,
// goroutines and heap per idle candidate), shards (10,000 elections × 3
// processes on a Session each, the Campaign calls paced), burst (the same
// shape with every Campaign call started at once: time until every
// election leads, the member's requests, memory per election) and
// inprocess (backend/inmem handover, the simulator's throughput) and
// postgres (backend/postgres beside a pg_try_advisory_lock election on a
// PostgreSQL 15 cluster: handover, crash failover, statements per idle
// candidate at 1,000 candidates) and kube (backend/kube beside client-go's
// leaderelection on a kube-apiserver: handover, crash failover, requests
// per idle candidate, watch events per renewal and the waiters a handover
// wakes at 2, 10 and 100 candidates; the API server named by
// KUBE_APISERVER, make kube-apiserver builds it).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/electkit/election/bench/internal/harness"
	"github.com/electkit/election/bench/internal/servers"
)

func main() {
	servers.ServeIfChild()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.Bool("short", false, "smoke run: tiny sample counts, every scenario's path once")
	scen := fs.String("scenarios", "", "comma-separated scenarios to run (default all: "+strings.Join(harness.Scenarios, ",")+")")
	samples := fs.Int("samples", 0, "handover samples per regime (0: the mode's default; also caps crash samples)")
	out := fs.String("out", "bench-results", "directory for report.md, samples.json, distributions.svg")
	libsFlag := fs.String("libs", "", "comma-separated substrings: measure only the libraries whose names contain one (the floors always run)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	scaleNs := fs.String("scale", "", "comma-separated candidate counts for the scale scenario (default: the mode's)")
	shardsN := fs.Int("shards", 0, "elections in the shards scenario (0: the mode's default, 10000; 20 with -short)")
	burstN := fs.Int("burst", 0, "elections in the burst scenario (0: the mode's default, 10000; 200 with -short, where the ZooKeeper case runs at most 10)")
	burstCap := fs.Duration("burst-cap", 0, "how long the burst scenario waits for every election to lead (0: the mode's default, 150s; 30s with -short)")
	cpuProfile := fs.String("cpuprofile", "", "write this process's CPU profile (the candidates' side; the etcd member runs in a child, see "+servers.PprofEnv+") to this file")
	allocProfile := fs.String("allocprofile", "", "write this process's allocation profile (every library's and the harness's, one allocation in 4 KiB sampled) to this file at the end, to see what each library allocates on a scenario's path")
	heapProfile := fs.String("heapprofile", "", "the burst scenario writes the heap profile it measures an idle election on to this prefix + \"-<library>.pprof\"")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *shardsN < 0 {
		fmt.Fprintf(stderr, "bench: -shards %d is negative\n", *shardsN)
		return 2
	}
	if *burstN < 0 || *burstCap < 0 {
		fmt.Fprintf(stderr, "bench: -burst %d or -burst-cap %v is negative\n", *burstN, *burstCap)
		return 2
	}
	if *samples < 0 {
		fmt.Fprintf(stderr, "bench: -samples %d is negative\n", *samples)
		return 2
	}
	cfg := harness.Config{Short: *short, Samples: *samples, Libs: *libsFlag, Shards: *shardsN, Burst: *burstN, BurstCap: *burstCap, HeapProfile: *heapProfile, Command: "bench " + strings.Join(args, " ")}
	for _, f := range strings.Split(*scaleNs, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "bench: -scale %q: %q is not a positive count\n", *scaleNs, f)
			return 2
		}
		cfg.ScaleNs = append(cfg.ScaleNs, n)
	}
	if *scen != "" {
		for _, s := range strings.Split(*scen, ",") {
			if s = strings.TrimSpace(s); s != "" {
				cfg.Scenarios = append(cfg.Scenarios, s)
			}
		}
	}
	if !*quiet {
		cfg.Log = stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "bench: -cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "bench: -cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if *allocProfile != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			f, err := os.Create(*allocProfile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintf(stderr, "bench: -allocprofile: %v\n", err)
			}
		}()
	}
	if *heapProfile != "" {
		runtime.MemProfileRate = 512 // an idle election holds some 40 objects: sample them all
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := harness.Run(ctx, cfg)
	if rep == nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if werr := rep.Write(*out); werr != nil {
		fmt.Fprintln(stderr, "bench:", werr)
		return 1
	}
	fmt.Fprint(stdout, rep.Markdown())
	fmt.Fprintf(stderr, "bench: wrote %s/report.md, samples.json, distributions.svg\n", *out)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}
