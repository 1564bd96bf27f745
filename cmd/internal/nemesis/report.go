package nemesis

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// CheckOptions configures Check.
type CheckOptions struct {
	// FailoverBound is the bound of CheckFailover; zero leaves P6
	// unchecked (no verdict).
	FailoverBound time.Duration
	// VisPath, if not empty, is where CheckLinearizable writes porcupine's
	// HTML visualization.
	VisPath string
	// LinearizableTimeout bounds porcupine's search; zero means
	// DefaultLinearizableTimeout.
	LinearizableTimeout time.Duration
	// OperatorGrace is the grace of CheckValidTermsGrace; zero lets no
	// overlap pass.
	OperatorGrace time.Duration
}

// Report is the outcome of Check: figures of the run and every verdict.
type Report struct {
	Backend       string
	Seed          int64
	Fenced        bool
	Duration      time.Duration
	FaultsByKind  map[string]int
	Leaderships   int // Elected events
	Accepted      int // writes the register accepted
	Refused       int // writes it refused
	WorstFailover time.Duration
	Verdicts      []Verdict

	h *History
}

// Check runs every checker on h and gathers their verdicts with figures of
// the run.
func Check(h *History, o CheckOptions) Report {
	r := Report{
		Backend:       h.Backend,
		Seed:          h.Seed,
		Fenced:        h.Fenced,
		Duration:      time.Duration(h.End - h.Start),
		FaultsByKind:  map[string]int{},
		WorstFailover: WorstFailover(h),
		h:             h,
	}
	for _, f := range h.Faults {
		r.FaultsByKind[f.Kind]++
	}
	for _, e := range h.Events {
		if e.Kind == Elected {
			r.Leaderships++
		}
	}
	for _, w := range h.Writes {
		if w.OK {
			r.Accepted++
		} else {
			r.Refused++
		}
	}
	timeout := o.LinearizableTimeout
	if timeout <= 0 {
		timeout = DefaultLinearizableTimeout
	}
	r.Verdicts = []Verdict{
		CheckLinearizableTimeout(h, o.VisPath, timeout),
		CheckValidTermsGrace(h, o.OperatorGrace),
		CheckWrites(h),
		CheckTokens(h),
		CheckCallbacks(h),
	}
	if o.FailoverBound != 0 {
		r.Verdicts = append(r.Verdicts, CheckFailover(h, o.FailoverBound))
	}
	return r
}

// OK tells whether every verdict is OK.
func (r Report) OK() bool {
	for _, v := range r.Verdicts {
		if !v.OK {
			return false
		}
	}
	return true
}

// historyWindow is how far around a violation String prints the history.
const historyWindow = int64(2 * time.Second)

// String prints a human summary: the run's figures, each verdict, and for
// each failed verdict the seed and the history within ±2 s of the
// violation, instants in ms from the start of the run.
func (r Report) String() string {
	var b strings.Builder
	fencing := "fenced"
	if !r.Fenced {
		fencing = "unfenced"
	}
	fmt.Fprintf(&b, "backend %s, seed %d, %s register, run %s\n", r.Backend, r.Seed, fencing, r.Duration.Round(time.Millisecond))
	kinds := make([]string, 0, len(r.FaultsByKind))
	for k := range r.FaultsByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	if len(kinds) == 0 {
		b.WriteString("faults injected: none\n")
	} else {
		parts := make([]string, len(kinds))
		for i, k := range kinds {
			parts[i] = fmt.Sprintf("%s %d", k, r.FaultsByKind[k])
		}
		fmt.Fprintf(&b, "faults injected: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "leaderships %d, writes accepted %d, refused %d\n", r.Leaderships, r.Accepted, r.Refused)
	for _, v := range r.Verdicts {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "worst failover %s\n", r.WorstFailover.Round(time.Microsecond))
	if r.h == nil {
		return b.String()
	}
	for _, v := range r.Verdicts {
		if v.OK {
			continue
		}
		fmt.Fprintf(&b, "\n%s FAILED (seed %d)", v.Name, r.Seed)
		if v.At == 0 {
			b.WriteString(": no instant to show\n")
			continue
		}
		fmt.Fprintf(&b, " at %s; history from %s to %s:\n", rel(r.h, v.At), rel(r.h, v.At-historyWindow), rel(r.h, v.At+historyWindow))
		for _, l := range historyAround(r.h, v.At-historyWindow, v.At+historyWindow) {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

// historyAround lists the events, writes and faults of h between from and
// to, in time order.
func historyAround(h *History, from, to int64) []string {
	type line struct {
		at  int64
		txt string
	}
	var ls []line
	in := func(t int64) bool { return t >= from && t <= to }
	for _, e := range h.Events {
		if !in(e.At) {
			continue
		}
		s := fmt.Sprintf("%s %s pid %d token %d", e.Kind, e.Candidate, e.PID, e.Token)
		if e.Deadline != 0 {
			s += " deadline " + rel(h, e.Deadline)
		}
		if e.Err != "" {
			s += " err " + e.Err
		}
		ls = append(ls, line{e.At, s})
	}
	for i, w := range h.Writes {
		if !in(w.Call) && !in(w.Return) {
			continue
		}
		res := "refused"
		if w.OK {
			res = "ok"
		}
		ls = append(ls, line{w.Call, fmt.Sprintf("write #%d %s pid %d token %d %q -> %s at %s, saw (%d, %q)",
			i, w.Client, w.PID, w.Token, w.Value, res, rel(h, w.Return), w.PrevToken, w.PrevValue)})
	}
	for _, f := range h.Faults {
		end := max(f.End, f.Start)
		if end < from || f.Start > to {
			continue
		}
		s := fmt.Sprintf("fault %s %s pid %d", f.Kind, f.Target, f.PID)
		if f.End != 0 {
			s += " until " + rel(h, f.End)
		}
		ls = append(ls, line{f.Start, s})
	}
	for c, k := range h.Killed {
		if in(k) {
			ls = append(ls, line{k, "killed " + c})
		}
	}
	slices.SortStableFunc(ls, func(a, b line) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.txt, b.txt)) })
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = fmt.Sprintf("%12s  %s", rel(h, l.at), l.txt)
	}
	return out
}

// rel prints a Mono instant as ms from the start of the run.
func rel(h *History, t int64) string {
	return fmt.Sprintf("%+.3fms", float64(t-h.Start)/1e6)
}

// msDur prints a span of nanoseconds in ms.
func msDur(d int64) string { return fmt.Sprintf("%.3fms", float64(d)/1e6) }
