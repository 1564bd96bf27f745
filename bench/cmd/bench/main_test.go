package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/electkit/election/bench/internal/harness"
	"github.com/electkit/election/bench/internal/servers"
)

func TestMain(m *testing.M) {
	servers.ServeIfChild() // the etcd child process is this test binary
	os.Exit(m.Run())
}

// TestSmoke runs the -short smoke of every scenario on real servers and
// checks that the report has every table, every distribution has samples
// and no error, and the herd was counted (for ours and the naive election;
// the peers count nothing).
func TestSmoke(t *testing.T) {
	if err := servers.ZKAvailable(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI is set: the smoke must run)", err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	// The burst scenario at 30 elections: its three cases, each on a fresh
	// member, stay under 20 s with the race detector (the -short default,
	// 200, takes a minute under it).
	if code := run([]string{"-short", "-q", "-burst", "30", "-out", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s\nreport:\n%s", code, stderr.String(), stdout.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"## Targets", "## Handover", "## Transfer and preemption", "## Crash failover", "## Herd", "## Scale", "## Burst start", "## In process", "## PostgreSQL 15: backend/postgres beside a pg_try_advisory_lock election", "## Kubernetes: backend/kube beside client-go's leaderelection"} {
		if !bytes.Contains(md, []byte(h+"\n")) {
			t.Errorf("report.md has no %q section", h)
		}
	}
	if !bytes.Equal(md, stdout.Bytes()) {
		t.Errorf("stdout is not report.md")
	}
	var rep harness.Report
	j, err := os.ReadFile(filepath.Join(dir, "samples.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j, &rep); err != nil {
		t.Fatalf("samples.json: %v", err)
	}
	seen := map[string]bool{}
	for _, d := range rep.Dists {
		seen[d.Scenario+"/"+d.Target+"/"+d.Role] = true
		if d.Err != "" || len(d.MS) == 0 {
			t.Errorf("%s %s %s %s: %d samples, error %q", d.Scenario, d.Target, d.Case, d.Lib, len(d.MS), d.Err)
		}
	}
	for _, k := range []string{"handover/etcd-1/ours", "handover/etcd-3/ours", "handover/zk-1/ours", "handover/zk-3/ours",
		"handover/etcd-1/peer", "handover/etcd-1/floor", "handover/zk-3/floor", "crash/etcd-1/ours", "crash/zk-1/ours", "crash/etcd-1/peer",
		"transfer/etcd-1/ours", "transfer/zk-1/ours", "transfer/zk-3/floor"} {
		if !seen[k] {
			t.Errorf("no distribution %s", k)
		}
	}
	roles := map[string]bool{}
	for _, h := range rep.Herd {
		roles[h.Target+"/"+h.Role] = true
		if h.Err != "" || (h.Role != "peer" && (!h.Counted || len(h.Woken) == 0)) {
			t.Errorf("herd %s %s: counted %v, %d handovers, error %q", h.Target, h.Lib, h.Counted, len(h.Woken), h.Err)
		}
	}
	for _, k := range []string{"etcd-1/ours", "etcd-1/naive", "zk-1/ours", "zk-1/naive"} {
		if !roles[k] {
			t.Errorf("no herd row %s", k)
		}
	}
	for _, s := range rep.Scale {
		if s.Err != "" || s.LeadMS <= 0 || !s.Measured || (s.Role == "ours" && s.RegisteredMS <= 0) {
			t.Errorf("scale %s %s N=%d: %+v", s.Target, s.Lib, s.N, s)
		}
	}
	for _, b := range rep.Burst {
		if b.Err != "" || b.Led != b.Elections || !b.Measured || b.Requests <= 0 {
			t.Errorf("burst %s E=%d: %+v", b.Lib, b.Elections, b)
		}
	}
	if len(rep.Burst) != 4 {
		t.Errorf("%d burst rows, want 4 (backend/etcd with Sessions and with a lease each, concurrency.Election; backend/zk)", len(rep.Burst))
	}
	for _, b := range rep.Burst {
		if b.Target == "zk-1" && b.Elections != 10 {
			t.Errorf("burst %s on ZooKeeper: %d elections, want 10 in -short", b.Lib, b.Elections)
		}
	}
	if len(rep.Scale) < 3 || len(rep.InProcess) < 4 || len(rep.Targets) == 0 {
		t.Errorf("%d scale rows, %d in-process rows, %d targets", len(rep.Scale), len(rep.InProcess), len(rep.Targets))
	}
	if len(rep.Postgres) != 2 {
		t.Errorf("%d postgres rows, want 2 (backend/postgres, the advisory-lock election)", len(rep.Postgres))
	}
	for _, p := range rep.Postgres {
		if p.Err != "" || p.HandoverN == 0 || p.CrashN == 0 || p.IdleN == 0 {
			t.Errorf("postgres row %+v: an error or a case not measured", p)
		}
	}
	if len(rep.Kube) != 2 {
		t.Errorf("%d kube rows, want 2 (backend/kube, client-go's leaderelection)", len(rep.Kube))
	}
	for _, k := range rep.Kube {
		if k.Err != "" || len(k.HandoverMS) == 0 || len(k.CrashMS) == 0 || len(k.Idle) != 1 || k.Idle[0].Err != "" || k.Idle[0].N != 2 || k.Idle[0].Renewals == 0 {
			t.Errorf("kube row %+v: an error or a case not measured", k)
		}
		if k.Role == "ours" && len(k.Idle) == 1 && k.Idle[0].EventsPerRenewal <= 0 {
			t.Errorf("kube row %s: no watch event counted", k.Lib)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "distributions.svg"))
	if err != nil || !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("<polyline")) {
		t.Errorf("distributions.svg: %v, %.80q", err, svg)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-samples", "-1"}, {"-burst", "-1"}, {"-burst-cap", "-1s"}, {"-scenarios", "nope", "-out", t.TempDir()}, {"extra"}, {"-nosuchflag"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
		if strings.TrimSpace(errb.String()) == "" {
			t.Errorf("%q: nothing on stderr", args)
		}
	}
}
