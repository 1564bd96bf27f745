package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/electkit/election/bench/internal/libs"
)

// Report is everything one run measured.
type Report struct {
	Date      string         `json:"date"`
	Machine   string         `json:"machine"`
	Go        string         `json:"go"`
	Command   string         `json:"command"`
	Mode      string         `json:"mode"`
	Elapsed   string         `json:"elapsed"`
	Durations []ScenarioTime `json:"durations"`
	Notes     []string       `json:"notes"`
	Dists     []*Dist        `json:"distributions"`
	Herd      []*HerdRow     `json:"herd"`
	Scale     []*ScaleRow    `json:"scale"`
	Shards    []*ShardsRow   `json:"shards"`
	Burst     []*BurstRow    `json:"burst"`
	InProcess []*InProcRow   `json:"inprocess"`
	Postgres  []*PGRow       `json:"postgres"`
	Kube      []*KubeRow     `json:"kube"`
	Targets   []*Target      `json:"targets"`
}

// ScenarioTime is how long one scenario took.
type ScenarioTime struct {
	Scenario string `json:"scenario"`
	Took     string `json:"took"`
}

// Dist is one library's latency samples in one case of one scenario.
type Dist struct {
	Scenario string    `json:"scenario"` // handover, crash
	Target   string    `json:"target"`   // etcd-1, zk-3, …
	Store    string    `json:"store"`    // its title
	Case     string    `json:"case"`     // "churn: waited 20 ms", "TTL 2s"
	Lib      string    `json:"library"`
	Role     string    `json:"role"` // ours, peer, floor
	MS       []float64 `json:"samples_ms"`
	Bound    float64   `json:"bound_ms,omitempty"` // crash: the target bound
	Err      string    `json:"error,omitempty"`
	Note     string    `json:"note,omitempty"`
}

// Q returns the q-quantile (nearest rank) of the samples, NaN if none.
func (d *Dist) Q(q float64) float64 {
	if len(d.MS) == 0 {
		return math.NaN()
	}
	s := slices.Clone(d.MS)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(len(s)-1, i))]
}

// HerdRow is one library's herd figures.
type HerdRow struct {
	Target    string  `json:"target"`
	Store     string  `json:"store"`
	Lib       string  `json:"library"`
	Role      string  `json:"role"`
	N         int     `json:"candidates"`
	Handovers int     `json:"handovers"`
	Counted   bool    `json:"counted"`
	Woken     []int   `json:"woken"`    // per handover
	Events    []int64 `json:"events"`   // watch events delivered, per handover
	Requests  []int64 `json:"requests"` // requests issued, per handover
	Err       string  `json:"error,omitempty"`
	Note      string  `json:"note,omitempty"`
}

// ScaleRow is one library's figures at one size.
type ScaleRow struct {
	Target        string  `json:"target"`
	Store         string  `json:"store"`
	Lib           string  `json:"library"`
	Role          string  `json:"role"`
	N             int     `json:"candidates"`
	Clients       int     `json:"clients"`
	LeadMS        float64 `json:"one_leads_ms"`
	RegisteredMS  float64 `json:"all_registered_ms"` // NaN-free: -1 when not known
	ReqPerSecCand float64 `json:"steady_requests_per_s_per_candidate"`
	Counted       bool    `json:"counted"`
	Goroutines    float64 `json:"goroutines_per_candidate"`
	HeapBytes     float64 `json:"heap_bytes_per_candidate"`
	Measured      bool    `json:"memory_measured"` // goroutines and heap were measured
	Handovers     int     `json:"handovers"`       // handovers measured at the head of the full queue
	HandoverP50MS float64 `json:"handover_p50_ms"`
	HandoverP99MS float64 `json:"handover_p99_ms"`
	MemberRSSMiB  float64 `json:"member_rss_mib,omitempty"` // the etcd member's peak resident memory (sampled)
	Err           string  `json:"error,omitempty"`
	Note          string  `json:"note,omitempty"`
}

// InProcRow is one in-process figure.
type InProcRow struct {
	What   string  `json:"what"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Detail string  `json:"detail"`
}

// Target is one of the targets, as this run found it.
type Target struct {
	What   string `json:"what"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Status string `json:"status"` // met, MISSED, not measured
}

func newReport(cfg Config) *Report {
	mode := "full"
	if cfg.Short {
		mode = "short (smoke: tiny samples, figures meaningless)"
	}
	return &Report{
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Machine: machine(), Go: runtime.Version(),
		Command: cfg.Command, Mode: mode,
	}
}

func (r *Report) note(s string) { r.Notes = append(r.Notes, s) }

func (r *Report) dists(scenario string) []*Dist {
	var out []*Dist
	for _, d := range r.Dists {
		if d.Scenario == scenario {
			out = append(out, d)
		}
	}
	return out
}

func (r *Report) find(scenario, target, cas, lib string) *Dist {
	for _, d := range r.Dists {
		if d.Scenario == scenario && d.Target == target && d.Case == cas && d.Lib == lib {
			return d
		}
	}
	return nil
}

func (r *Report) ours(scenario, target, cas string) *Dist {
	for _, d := range r.Dists {
		if d.Scenario == scenario && d.Target == target && d.Case == cas && d.Role == "ours" {
			return d
		}
	}
	return nil
}

func ms(v float64) string {
	switch {
	case math.IsNaN(v) || v < 0:
		return "—"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "—"
	}
	x := a / b
	if x >= 10 {
		return fmt.Sprintf("%.1f×", x)
	}
	if x < 0.095 {
		return fmt.Sprintf("%.3g×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmark report\n\n")
	w("- command: `%s`\n- mode: %s\n- date: %s\n- machine: %s\n- Go: %s\n- took: %s", r.Command, r.Mode, r.Date, r.Machine, r.Go, r.Elapsed)
	if len(r.Durations) > 0 {
		var parts []string
		for _, d := range r.Durations {
			parts = append(parts, d.Scenario+" "+d.Took)
		}
		w(" (%s)", strings.Join(parts, ", "))
	}
	w("\n\n")
	if len(r.Notes) > 0 {
		w("## Notes\n\n")
		for _, n := range r.Notes {
			if strings.HasPrefix(n, "NOT MEASURED") {
				w("- **%s**\n", n)
			} else {
				w("- %s\n", n)
			}
		}
		w("\n")
	}
	w("## Targets\n\nReported, not asserted. p50 unless said.\n\n| target | want | got | status |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		st := t.Status
		if st == "MISSED" {
			st = "**MISSED**"
		}
		w("| %s | %s | %s | %s |\n", t.What, t.Want, t.Got, st)
	}
	w("\n")

	if ds := r.dists("handover"); len(ds) > 0 {
		w("## Handover\n\nRelease (Resign, the peer's own release) → the waiting candidate's Campaign returns, in ms. The waiter began waiting 20 ms (churn) or 300 ms (settled) before the release. Each library has two candidates on their own clients; libraries and the floor take turns sample by sample on the same servers. \"ours ÷ this\" divides our p50 by the row's p50 (below 1: ours is faster). The floor is a plain delete → the watch event on another client of the same servers.\n\n")
		w("| store | regime | library | n | p50 | p90 | p99 | ours ÷ this |\n|---|---|---|---|---|---|---|---|\n")
		for _, d := range ds {
			o := r.ours("handover", d.Target, d.Case)
			rat := ""
			if d.Role != "ours" && o != nil {
				rat = ratio(o.Q(0.5), d.Q(0.5))
			}
			lib := d.Lib
			if d.Err != "" {
				lib += " (error: " + d.Err + ")"
			}
			if d.Note != "" {
				lib += " (" + d.Note + ")"
			}
			w("| %s | %s | %s | %d | %s | %s | %s | %s |\n", d.Store, d.Case, lib, len(d.MS), ms(d.Q(0.5)), ms(d.Q(0.9)), ms(d.Q(0.99)), rat)
		}
		w("\n")
	}
	if ds := r.dists("transfer"); len(ds) > 0 {
		w("## Transfer and preemption\n\nThree candidates of backend/etcd or backend/zk (one leads, two wait, each on its own client; made WithPreemption(%v), priority 0) take turns, sample by sample: a handover (the leader's Resign → the head of the queue's Campaign returns), a transfer (the leader's election.Transfer to the last of the two waiters, passing over the head → the target's Campaign returns; Transfer reads the queue to find its target: a read more than the hand-over itself), and the floor; 20 ms after the previous sample each. The old leader campaigns again after each sample. Then preemptions: a candidate of priority 1 campaigns → its Campaign returns (its registration, the hold-off, the hand-over); it then resigns. In ms; \"÷ handover\" divides the row's p50 by the handover's.\n\n", preemptHold)
		w("| store | case | n | p50 | p90 | p99 | ÷ handover |\n|---|---|---|---|---|---|---|\n")
		for _, d := range ds {
			rat := ""
			if h := r.find("transfer", d.Target, "handover (Resign)", d.Lib); h != nil && d != h && d.Role != "floor" {
				rat = ratio(d.Q(0.5), h.Q(0.5))
			}
			cas := d.Case
			if d.Err != "" {
				cas += " (error: " + d.Err + ")"
			}
			w("| %s | %s | %d | %s | %s | %s | %s |\n", d.Store, cas, len(d.MS), ms(d.Q(0.5)), ms(d.Q(0.9)), ms(d.Q(0.99)), rat)
		}
		w("\n")
	}
	if ds := r.dists("crash"); len(ds) > 0 {
		w("## Crash failover\n\nThe leader's connection goes dark (its TCP proxy drops every byte both ways; no release) → the waiting candidate's Campaign returns, in ms. The store must expire the lease or session. Bound: TTL + 0.6 s (etcd), session timeout + 0.5 s (ZooKeeper); \"within\" is checked on the maximum.\n\n")
		w("| store | TTL | library | n | p50 | p90 | p99 | max | bound | within |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, d := range ds {
			lib := d.Lib
			if d.Err != "" {
				lib += " (error: " + d.Err + ")"
			}
			within := "—"
			if len(d.MS) > 0 {
				within = "yes"
				if d.Q(1) > d.Bound {
					within = "**no**"
				}
			}
			w("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", d.Store, d.Case, lib, len(d.MS), ms(d.Q(0.5)), ms(d.Q(0.9)), ms(d.Q(0.99)), ms(d.Q(1)), ms(d.Bound), within)
		}
		w("\n")
	}
	if len(r.Herd) > 0 {
		w("## Herd\n\nN candidates wait, each on its own counted client; the leader releases once per handover. Woken: candidates other than the releaser whose client sent a request or got a watch event until things went quiet. Events: watch events delivered to them; requests: requests they sent (renewals not counted). Per handover: mean (max).\n\n")
		w("| store | library | N | handovers | woken | watch events | requests |\n|---|---|---|---|---|---|---|\n")
		for _, h := range r.Herd {
			lib := h.Lib
			if h.Err != "" {
				lib += " (error: " + h.Err + ")"
			}
			if h.Note != "" {
				lib += " (" + h.Note + ")"
			}
			if !h.Counted {
				w("| %s | %s | %d | %d | not counted | not counted | not counted |\n", h.Store, lib, h.N, h.Handovers)
				continue
			}
			w("| %s | %s | %d | %d | %s | %s | %s |\n", h.Store, lib, h.N, len(h.Woken), meanMaxI(h.Woken), meanMax64(h.Events), meanMax64(h.Requests))
		}
		w("\n")
	}
	if len(r.Scale) > 0 {
		w("## Scale\n\nN candidates of one election over a pool of clients (500 candidates per client for every library that shares clients; client-go and Curator connect each candidate on its own, through its own proxy), lease TTL 30 s on etcd, session timeout 10 s on ZooKeeper (its maximum at tickTime 500 ms). The Campaign calls start as a fleet rolls out: at most 50 started and not yet registered. One leads / all registered: from the first candidate's creation (ms); a size that has not registered within the time limit is reported with what it reached. Steady state: every request, event and renewal on the pool's clients per second, per candidate, over one TTL after registration (renewals of candidates registered together come in bursts). Every case runs on a fresh server. Goroutines and heap: growth of this process per idle candidate after a GC (the servers run in other processes; the harness's own goroutine per waiting Campaign call is included for every library). The heap column leaves out goroutine descriptors (about 0.5 KB each; the runtime keeps them for reuse, so without a warm-up only the first library measured would pay for them) and stacks: read it with the goroutines column. Handover at N: then the leader releases and the next candidate's Campaign returns, 50 times in a row at the head of the full queue (compare with the handover scenario's churn figures, N = 2). backend/etcd runs twice: with a lease per candidate, as N processes would, and with one Session per client (\"a Session per client\"), as N candidates in a few processes would. Member RSS: the etcd member's peak resident memory, sampled every 10–100 ms through the case.\n\n")
		w("| store | N | library | clients | one leads (ms) | all registered (ms) | member RSS (MiB) | steady req/s per candidate | goroutines / candidate | heap bytes / candidate | handover at N, p50 / p99 (ms) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.Scale {
			lib := s.Lib
			if s.Err != "" {
				lib += " (error: " + s.Err + ")"
			}
			if s.Note != "" {
				lib += " (" + s.Note + ")"
			}
			rate := "not counted"
			if s.Counted {
				rate = fmt.Sprintf("%.4f", s.ReqPerSecCand)
			}
			g, h := fmt.Sprintf("%.2f", s.Goroutines), fmt.Sprintf("%.0f", s.HeapBytes)
			if !s.Measured {
				g, h = "—", "—"
			}
			ho := "—"
			if s.Handovers > 0 {
				ho = fmt.Sprintf("%s / %s (%d)", ms(s.HandoverP50MS), ms(s.HandoverP99MS), s.Handovers)
			}
			rss := "—"
			if s.MemberRSSMiB > 0 {
				rss = fmt.Sprintf("%.0f", s.MemberRSSMiB)
			}
			w("| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", s.Store, s.N, lib, s.Clients, ms(s.LeadMS), ms(s.RegisteredMS), rss, rate, g, h, ho)
		}
		w("\n")
	}
	if len(r.Shards) > 0 {
		w("## Shards\n\nE elections, each with a candidate of each of three processes (one connection each), every process on one session: backend/etcd's Session, concurrency.Election's Session, backend/zk's connection. Lease TTL / session timeout 10 s. The first process campaigns in every election (at most 50 Campaign calls in flight) and leads there; then the two others, at most 50 started and not yet registered (etcd: counted by a watch on the elections' common prefix, which costs the store nothing per count; ZooKeeper: not counted, so not timed). Quiet: when the three processes' traffic fell below one request, event or renewal per second per process after registration (a client creates the watches of one stream one at a time, after the keys are counted). Steady state: every request, event and renewal of the three processes per second, per process, over one TTL after that. Goroutines and heap: growth of this process per idle election (three candidates) after a GC; as in Scale, the heap column leaves out goroutine descriptors and stacks. Every case runs on a fresh server.\n\n")
		w("| store | elections | library | all lead (ms) | all registered (ms) | quiet (ms) | steady req/s per process | goroutines / election | heap bytes / election |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.Shards {
			lib := s.Lib
			if s.Err != "" {
				lib += " (error: " + s.Err + ")"
			}
			if s.Note != "" {
				lib += " (" + s.Note + ")"
			}
			w("| %s | %d | %s | %s | %s | %s | %.2f | %.2f | %.0f |\n", s.Store, s.Elections, lib, ms(s.LeadersMS), ms(s.RegisteredMS), ms(s.QuietMS), s.ReqPerSecProc, s.Goroutines, s.HeapBytes)
		}
		w("\n")
	}
	if len(r.Burst) > 0 {
		w("## Burst start\n\nE elections, each with a candidate on each of three clients of one etcd member (in a child process), lease TTL 10 s; every Campaign call started at once, as a service with a leader per shard starts. backend/etcd and concurrency.Election with one Session per client, shared by that client's candidates; backend/etcd again with a lease per Elector (etcd.New, no Session). All led: from the first Campaign call until every election has a leader; a case that has not within the cap reports how many had. Requests: what the member received (its own `grpc_server_msg_received_total`, unary requests and stream messages, summed) until then, in all, per election and per second, and its largest parts by method. Quiet: when the member received, renewals aside, at most one message per second per client, at most 20 s after all led. Steady: the member's received messages per second over one TTL after the quiet (renewals come every third of the TTL: a 10 s window holds two or three per lease), in all and per Session (per lease with a lease per Elector). Goroutines and heap: growth of this process per idle election (three candidates, the harness's goroutine per waiting Campaign call included) after a GC, from a baseline with the clients and Sessions connected; as in Scale, the heap column leaves out goroutine descriptors and stacks. Member RSS: at the end of the case (peak in brackets). \"÷ c.E\": the row's figure divided by concurrency.Election's at the same E. Every case runs on a fresh member. The ZooKeeper rows: one standalone server (a fresh one per case), three connections (session timeout 10 s), a candidate of each election on each; backend/zk (zk.New on the shared connection), and Curator's LeaderLatch with its latches on three CuratorFrameworks in one JVM (not in -short). Their requests are the server's own zk_packets_received (the mntr four-letter word: requests and pings), \"by method\" its znodes and watches, quiet counts pings, steady is per connection; member RSS is the server's JVM's.\n\n")
		w("| elections | library | all led (ms) | ÷ c.E | requests until all led | per election | requests/s | by method | quiet (ms) | steady req/s: all / per Session | goroutines / election | heap bytes / election | ÷ c.E | member RSS, MiB (peak) | ÷ c.E |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.Burst {
			lib := s.Lib
			if s.Err != "" {
				lib += " (error: " + s.Err + ")"
			}
			if s.Note != "" {
				lib += " (" + s.Note + ")"
			}
			p := r.burstPeer(s)
			led := ms(s.LedMS)
			if s.LedMS < 0 {
				led = fmt.Sprintf("%d of %d after %s", s.Led, s.Elections, ms(s.CapMS))
			}
			rl, rh, rr := "", "", ""
			if p != nil && p != s {
				switch {
				case s.LedMS >= 0 && p.LedMS >= 0:
					rl = ratio(s.LedMS, p.LedMS)
				case p.LedMS >= 0:
					rl = "> " + ratio(s.CapMS, p.LedMS)
				}
				if s.Measured && p.Measured {
					rh = ratio(s.HeapBytes, p.HeapBytes)
				}
				if p.Measured {
					rr = ratio(s.MemberRSSMiB, p.MemberRSSMiB)
				}
			}
			steady, g, h, quiet := "—", "—", "—", "—"
			if s.Measured {
				steady, g, h, quiet = fmt.Sprintf("%.1f / %.2f", s.Steady, s.SteadyPerSession), fmt.Sprintf("%.2f", s.Goroutines), fmt.Sprintf("%.0f", s.HeapBytes), ms(s.QuietMS)
			}
			w("| %d | %s | %s | %s | %d | %.1f | %.0f | %s | %s | %s | %s | %s | %s | %.0f (%.0f) | %s |\n", s.Elections, lib, led, rl, s.Requests, float64(s.Requests)/float64(s.Elections), s.ReqPerSec, s.ByMethod, quiet, steady, g, h, rh, s.MemberRSSMiB, s.PeakRSSMiB, rr)
		}
		w("\n")
	}
	if len(r.InProcess) > 0 {
		w("## In process\n\n| what | figure | detail |\n|---|---|---|\n")
		for _, x := range r.InProcess {
			w("| %s | %s %s | %s |\n", x.What, fmtVal(x.Value), x.Unit, x.Detail)
		}
		w("\n")
	}
	w("Distributions: distributions.svg (CDF of every handover and crash failover sample); raw samples: samples.json.\n")
	r.pgMarkdown(w)
	r.kubeMarkdown(w)
	return b.String()
}

// burstPeer returns concurrency.Election's burst row at s's size (nil
// if there is none).
func (r *Report) burstPeer(s *BurstRow) *BurstRow {
	for _, p := range r.Burst {
		if p.Lib == libs.ConcurrencyName && p.Elections == s.Elections && p.Target == s.Target {
			return p
		}
	}
	return nil
}

func fmtVal(v float64) string {
	if v >= 1e6 {
		return fmt.Sprintf("%.2f M", v/1e6)
	}
	return ms(v)
}

func meanMaxI(xs []int) string {
	if len(xs) == 0 {
		return "—"
	}
	s, m := 0, xs[0]
	for _, x := range xs {
		s += x
		m = max(m, x)
	}
	return fmt.Sprintf("%.1f (%d)", float64(s)/float64(len(xs)), m)
}

func meanMax64(xs []int64) string {
	if len(xs) == 0 {
		return "—"
	}
	var s, m int64 = 0, xs[0]
	for _, x := range xs {
		s += x
		m = max(m, x)
	}
	return fmt.Sprintf("%.1f (%d)", float64(s)/float64(len(xs)), m)
}

// Write writes report.md, samples.json and distributions.svg into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "samples.json"), j, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "distributions.svg"), []byte(r.SVG()), 0o644)
}
