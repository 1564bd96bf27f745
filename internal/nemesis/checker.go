package nemesis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict is what one checker concluded about a history.
type Verdict struct {
	Name   string // the property, e.g. "linearizable", "P3 valid terms"
	OK     bool
	Detail string // what was found: the violation, or a summary when OK
	At     int64  // Mono instant of the violation, or 0
}

// String prints the verdict on one line.
func (v Verdict) String() string {
	s := "FAIL"
	if v.OK {
		s = "ok"
	}
	return fmt.Sprintf("%-22s %-4s %s", v.Name, s, v.Detail)
}

// Names of the checkers, as they appear in Verdict.Name.
const (
	NameLinearizable = "linearizable"
	NameValidTerms   = "P3 valid terms"
	NameWrites       = "P3 writes in terms"
	NameTokens       = "P1/P2 tokens"
	NameCallbacks    = "P5 callbacks"
	NameFailover     = "P6 failover"
)

// DefaultLinearizableTimeout bounds the search of CheckLinearizable.
const DefaultLinearizableTimeout = 60 * time.Second

// regState is the state of the fenced register model: the highest token
// accepted and the value written last.
type regState struct {
	Token uint64
	Value string
}

// regInput is one write: a token and a value.
type regInput struct {
	Token uint64
	Value string
}

// regOutput is the register's answer to a write: whether it was accepted,
// and the state it saw just before.
type regOutput struct {
	OK   bool
	Prev regState
}

// registerModel is the fenced register as porcupine sees it. A write is
// accepted iff its token is at least the highest accepted; an accepted write
// makes (token, value) the state. The output also carries the state the
// register saw before the write, which pins every write to one place in any
// linearization: a stale write accepted after a higher one is illegal even
// when their intervals overlap.
var registerModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		if out.Prev != s || out.OK != (in.Token >= s.Token) {
			return false, s
		}
		if out.OK {
			return true, regState(in)
		}
		return true, s
	},
	Hash: func(state any) uint64 {
		s := state.(regState)
		h := s.Token * 0x9e3779b97f4a7c15
		for i := 0; i < len(s.Value); i++ {
			h = (h ^ uint64(s.Value[i])) * 0x100000001b3
		}
		return h
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		res := "refused"
		if out.OK {
			res = "ok"
		}
		return fmt.Sprintf("write(%d, %q) -> %s, saw (%d, %q)", in.Token, in.Value, res, out.Prev.Token, out.Prev.Value)
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		return fmt.Sprintf("(%d, %q)", s.Token, s.Value)
	},
}

// CheckLinearizable checks with porcupine that the register's writes are
// linearizable against the fenced register model, with a timeout of
// DefaultLinearizableTimeout. See CheckLinearizableTimeout.
func CheckLinearizable(h *History, visPath string) Verdict {
	return CheckLinearizableTimeout(h, visPath, DefaultLinearizableTimeout)
}

// CheckLinearizableTimeout checks with porcupine that the register's writes
// are linearizable: one operation per Write, from its Call to its Return,
// with input (token, value) and output (accepted, the state seen before).
// With fencing off, a stale write accepted after a higher token makes the
// history illegal: the negative control. A search that runs out of time is
// not OK. When visPath is not empty, porcupine's HTML visualization is
// written there, with each candidate's Terms and the faults as annotations.
func CheckLinearizableTimeout(h *History, visPath string, timeout time.Duration) Verdict {
	v := Verdict{Name: NameLinearizable}
	clients := map[string]int{}
	ops := make([]porcupine.Operation, 0, len(h.Writes))
	clamped := 0
	for i, w := range h.Writes {
		id, ok := clients[w.Client]
		if !ok {
			id = len(clients)
			clients[w.Client] = id
		}
		call := w.Call
		if call > w.Return {
			// A Call after the register's answer is not possible on one
			// clock; keep the write, pinned to its Return.
			call = w.Return
			clamped++
		}
		ops = append(ops, porcupine.Operation{
			ClientId: id,
			Input:    regInput{Token: w.Token, Value: w.Value},
			Call:     call,
			Output:   regOutput{OK: w.OK, Prev: regState{Token: w.PrevToken, Value: w.PrevValue}},
			Return:   w.Return,
			Metadata: fmt.Sprintf("write #%d by %s (pid %d)", i, w.Client, w.PID),
		})
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, ops, timeout)
	var notes []string
	if clamped > 0 {
		notes = append(notes, fmt.Sprintf("%d writes had Call after Return", clamped))
	}
	if visPath != "" {
		info.AddAnnotations(annotations(h))
		if err := porcupine.VisualizePath(registerModel, info, visPath); err != nil {
			notes = append(notes, fmt.Sprintf("visualization not written: %v", err))
		} else {
			notes = append(notes, "visualization: "+visPath)
		}
	}
	switch res {
	case porcupine.Ok:
		v.OK = true
		v.Detail = fmt.Sprintf("%d writes by %d clients", len(ops), len(clients))
	case porcupine.Illegal:
		i, why := firstIllegalWrite(h.Writes)
		if i >= 0 {
			w := h.Writes[i]
			v.At = w.Return
			v.Detail = fmt.Sprintf("not linearizable: write #%d by %s token %d %q %s", i, w.Client, w.Token, w.Value, why)
		} else {
			v.Detail = "not linearizable (the served order is legal, but the Call/Return instants admit no linearization)"
		}
	default:
		v.Detail = fmt.Sprintf("unknown: porcupine gave up after %v on %d writes", timeout, len(ops))
	}
	if len(notes) > 0 {
		v.Detail += "; " + strings.Join(notes, "; ")
	}
	return v
}

// firstIllegalWrite replays the writes in the order the register served
// them against the model and returns the first one the model does not
// allow, with why, or -1.
func firstIllegalWrite(ws []Write) (int, string) {
	var s regState
	for i, w := range ws {
		prev := regState{Token: w.PrevToken, Value: w.PrevValue}
		switch {
		case w.OK && w.Token < s.Token:
			return i, fmt.Sprintf("accepted after token %d", s.Token)
		case !w.OK && w.Token >= s.Token:
			return i, fmt.Sprintf("refused though the highest token was %d", s.Token)
		case prev != s:
			return i, fmt.Sprintf("saw (%d, %q) where the register held (%d, %q)", prev.Token, prev.Value, s.Token, s.Value)
		}
		if w.OK {
			s = regState{Token: w.Token, Value: w.Value}
		}
	}
	return -1, ""
}

// annotations shows the Terms and faults of h beside the writes.
func annotations(h *History) []porcupine.Annotation {
	var as []porcupine.Annotation
	for _, t := range Terms(h) {
		as = append(as, porcupine.Annotation{
			Tag:         "term " + t.Candidate,
			Start:       t.Start,
			End:         t.End,
			Description: fmt.Sprintf("token %d", t.Token),
			Details:     fmt.Sprintf("%s token %d valid %s..%s (%s)", t.Candidate, t.Token, rel(h, t.Start), rel(h, t.End), t.EndedBy),
		})
	}
	for _, f := range h.Faults {
		as = append(as, porcupine.Annotation{
			Tag:             "faults",
			Start:           f.Start,
			End:             f.End,
			Description:     f.Kind + " " + f.Target,
			Details:         fmt.Sprintf("%s %s pid %d %s..%s", f.Kind, f.Target, f.PID, rel(h, f.Start), rel(h, f.End)),
			BackgroundColor: "#f7c6c6",
		})
	}
	return as
}

// Term is one leadership as a history shows it: a candidate's Term from its
// Elected event until it stopped being valid.
type Term struct {
	Candidate string
	PID       int
	Token     uint64
	Start     int64 // Mono: Elected.At
	// End is the Mono instant the Term stopped being valid: the earlier of
	// its Demoted.At and its last reported Deadline; without a Demoted
	// (killed, or still leading when the run ended) its last Deadline. A
	// Term whose events carried no Deadline ends at its Demoted, its
	// candidate's kill, or the end of the run.
	End     int64
	EndedBy string // "demoted", "deadline", "killed", "superseded", "run end"
}

// Terms derives every Term of a history from its events, ordered by Start.
// Each candidate's events are taken in the order of their instants (arrival
// order among equal instants); a Renewed or Demoted that matches no open
// Term of its candidate is ignored here (CheckCallbacks reports it).
//
// A Term's deadline is the latest Deadline any Elected or Renewed event of
// its process and token reported, whatever the order of the events: the
// library moves a Term's deadline only while the Term is valid and never
// back, but its after-renewal hook may run, and so report, after the Term
// ended.
func Terms(h *History) []Term {
	latest := latestDeadlines(h)
	var out []Term
	for cand, evs := range eventsByCandidate(h) {
		var open *Term
		var deadline int64
		closeOpen := func(end int64, by string) {
			if deadline > 0 && deadline < end {
				end, by = deadline, "deadline"
			}
			open.End, open.EndedBy = max(end, open.Start), by
			out = append(out, *open)
			open, deadline = nil, 0
		}
		for _, e := range evs {
			switch e.Kind {
			case Elected:
				if open != nil {
					// A killed process's Term stays valid until its
					// Deadline even when a new process of the candidate
					// is elected; otherwise the new Elected ends it.
					if _, killed := killedAfter(h, cand, open.PID, open.Start); killed && deadline > 0 && e.PID != open.PID {
						open.End, open.EndedBy = max(deadline, open.Start), "killed, deadline"
						out = append(out, *open)
					} else {
						closeOpen(e.At, "superseded")
					}
				}
				open = &Term{Candidate: cand, PID: e.PID, Token: e.Token, Start: e.At}
				deadline = latest[termKey{cand, e.PID, e.Token}]
			case Demoted:
				if open != nil && open.Token == e.Token {
					closeOpen(e.At, "demoted")
				}
			}
		}
		if open != nil {
			switch k, killed := killedAfter(h, cand, open.PID, open.Start); {
			case deadline > 0:
				open.End, open.EndedBy = max(deadline, open.Start), "deadline"
				if killed {
					open.EndedBy = "killed, deadline"
				}
				out = append(out, *open)
			case killed:
				closeOpen(k, "killed")
			default:
				closeOpen(h.End, "run end")
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Term) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Candidate, b.Candidate))
	})
	return out
}

// termKey names one Term: a process of a candidate and a token.
type termKey struct {
	cand  string
	pid   int
	token uint64
}

// latestDeadlines is the latest Deadline reported per Term (Elected and
// Renewed events).
func latestDeadlines(h *History) map[termKey]int64 {
	m := map[termKey]int64{}
	for _, e := range h.Events {
		if (e.Kind == Elected || e.Kind == Renewed) && e.Deadline != 0 {
			k := termKey{e.Candidate, e.PID, e.Token}
			m[k] = max(m[k], e.Deadline)
		}
	}
	return m
}

// eventsByCandidate groups the events per candidate, each group stably
// sorted by At.
func eventsByCandidate(h *History) map[string][]Event {
	m := map[string][]Event{}
	for _, e := range h.Events {
		m[e.Candidate] = append(m[e.Candidate], e)
	}
	for _, evs := range m {
		slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	}
	return m
}

// killedAfter tells whether the candidate (or its process pid) was killed
// at or after the instant from, and when: by History.Killed or by a "kill"
// fault.
func killedAfter(h *History, cand string, pid int, from int64) (int64, bool) {
	if k, ok := h.Killed[cand]; ok && k >= from {
		return k, true
	}
	for _, f := range h.Faults {
		if f.Kind == "kill" && f.Start >= from && (f.Target == cand || (pid != 0 && f.PID == pid)) {
			return f.Start, true
		}
	}
	return 0, false
}

// CheckValidTerms checks P3: no two candidates (or two processes of one
// candidate ID) hold valid Terms at the same instant (see Term for when a Term is valid). It reports the
// overlap that begins first, with both candidates, tokens and instants.
func CheckValidTerms(h *History) Verdict { return CheckValidTermsGrace(h, 0) }

// CheckValidTermsGrace is CheckValidTerms that lets one overlap pass: a
// Term that begins while another client is removing the leader's key (an
// operator fault in progress, or ended within grace) and overlaps a Term
// that ended at most grace after the operator fault began. The old leader
// and its successor learn of the removal from the same store event, and
// nothing orders two processes' handling of it (see backend/etcd's doc,
// "Other clients of the store"): such overlaps are counted and reported;
// fencing is judged by the linearizability check. A longer overlap, or
// one with no operator fault, is a violation as ever.
func CheckValidTermsGrace(h *History, grace time.Duration) Verdict {
	v := Verdict{Name: NameValidTerms}
	ts := Terms(h)
	found := false
	var a, b Term
	excused, longest := 0, int64(0)
	operatorRace := func(t, u Term) bool {
		g := int64(grace)
		if g <= 0 || min(t.End, u.End)-u.Start > g {
			return false
		}
		for _, f := range h.Faults {
			if f.Kind == "operator" && f.Start <= u.Start && u.Start <= f.End+g && t.End-f.Start <= g && t.End >= f.Start {
				return true
			}
		}
		return false
	}
	for i, t := range ts {
		for _, u := range ts[i+1:] {
			if u.Start >= t.End {
				break // ts is sorted by Start: no later Term starts inside t
			}
			// One process's Terms follow one another; a killed process's
			// Term may still be valid when a new process of the same
			// candidate ID is elected, and that is an overlap too.
			if (u.Candidate == t.Candidate && u.PID == t.PID) || u.Start >= u.End || t.Start >= t.End {
				continue
			}
			if operatorRace(t, u) {
				excused++
				longest = max(longest, min(t.End, u.End)-u.Start)
				continue
			}
			if !found || u.Start < v.At {
				found, a, b, v.At = true, t, u, u.Start
			}
		}
	}
	if !found {
		v.OK = true
		v.Detail = fmt.Sprintf("%d terms, none overlapping", len(ts))
		if excused > 0 {
			v.Detail = fmt.Sprintf("%d terms; %d overlapped as another client removed the leader's key, the longest for %s (grace %v)",
				len(ts), excused, msDur(longest), grace)
		}
		return v
	}
	v.Detail = fmt.Sprintf("%s token %d valid %s..%s (%s) overlaps %s token %d valid %s..%s (%s) for %s",
		a.Candidate, a.Token, rel(h, a.Start), rel(h, a.End), a.EndedBy,
		b.Candidate, b.Token, rel(h, b.Start), rel(h, b.End), b.EndedBy,
		msDur(min(a.End, b.End)-b.Start))
	return v
}

// CheckWrites checks P3 from the writer's side: every write was decided
// (its Call) while a Term of its writer — the same candidate, process and
// token — was valid, from the Term's Start to its End. A candidate takes a
// write's Call before it checks its Term, so a correct library makes every
// Call fall inside the Term however late the write itself arrives. A Term
// of a killed process is only held to its Start: the process may have died
// with a renewal that moved its deadline still unreported. A write of a
// Term the history does not show fails.
func CheckWrites(h *History) Verdict {
	v := Verdict{Name: NameWrites}
	byKey := map[termKey][]Term{}
	for _, t := range Terms(h) {
		k := termKey{t.Candidate, t.PID, t.Token}
		byKey[k] = append(byKey[k], t)
	}
	found := false
	for i, w := range h.Writes {
		ts := byKey[termKey{w.Client, w.PID, w.Token}]
		why := ""
		switch {
		case len(ts) == 0:
			why = "no Term of its writer has that token"
		default:
			why = "its Term was not valid then"
			for _, t := range ts {
				_, killed := killedAfter(h, t.Candidate, t.PID, t.Start)
				if w.Call >= t.Start && (w.Call <= t.End || killed) {
					why = ""
					break
				}
			}
			if why != "" {
				t := ts[0]
				why = fmt.Sprintf("its Term was valid %s..%s (%s)", rel(h, t.Start), rel(h, t.End), t.EndedBy)
			}
		}
		if why == "" || (found && w.Call >= v.At) {
			continue
		}
		found, v.At = true, w.Call
		v.Detail = fmt.Sprintf("write #%d by %s (pid %d) token %d %q decided at %s: %s",
			i, w.Client, w.PID, w.Token, w.Value, rel(h, w.Call), why)
	}
	if !found {
		v.OK = true
		v.Detail = fmt.Sprintf("%d writes, each decided in its Term", len(h.Writes))
	}
	return v
}

// CheckTokens checks P1, no token granted to two candidates, and P2, tokens
// strictly increase across successive leaderships ordered by Elected.At.
func CheckTokens(h *History) Verdict {
	v := Verdict{Name: NameTokens}
	var elected []Event
	for _, e := range h.Events {
		if e.Kind == Elected {
			elected = append(elected, e)
		}
	}
	slices.SortStableFunc(elected, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	owner := map[uint64]Event{}
	for i, e := range elected {
		if o, ok := owner[e.Token]; ok && o.Candidate != e.Candidate {
			v.At = e.At
			v.Detail = fmt.Sprintf("P1: token %d granted to %s at %s and to %s at %s",
				e.Token, o.Candidate, rel(h, o.At), e.Candidate, rel(h, e.At))
			return v
		}
		owner[e.Token] = e
		if i > 0 && e.Token <= elected[i-1].Token {
			p := elected[i-1]
			v.At = e.At
			v.Detail = fmt.Sprintf("P2: %s elected with token %d at %s after %s with token %d at %s",
				e.Candidate, e.Token, rel(h, e.At), p.Candidate, p.Token, rel(h, p.At))
			return v
		}
	}
	v.OK = true
	v.Detail = fmt.Sprintf("%d leaderships, tokens strictly increasing", len(elected))
	return v
}

// CheckCallbacks checks P5: per candidate, events alternate Elected,
// Demoted with one token; no Elected while a Term is open; a Demoted needs
// its Elected, and a Renewed an Elected of its process with its token. Only a candidate killed while
// leading may leave a Term open; a new process of a killed candidate may
// then start afresh.
func CheckCallbacks(h *History) Verdict {
	v := Verdict{Name: NameCallbacks}
	type fail struct {
		at  int64
		msg string
	}
	var first *fail
	report := func(at int64, format string, args ...any) {
		if first == nil || at < first.at {
			first = &fail{at, fmt.Sprintf(format, args...)}
		}
	}
	n := 0
	electedKeys := map[termKey]bool{}
	for _, e := range h.Events {
		if e.Kind == Elected {
			electedKeys[termKey{e.Candidate, e.PID, e.Token}] = true
		}
	}
	for cand, evs := range eventsByCandidate(h) {
		var open *Event // the open Term's Elected
		for _, e := range evs {
			n++
			if e.Kind == Renewed {
				// A renewal belongs to a Term of its process, but its
				// instant may precede OnElected (the first renewal can
				// come back before OnElected starts) or follow the Term's
				// end (its hook runs after), so it only needs its Elected.
				if !electedKeys[termKey{cand, e.PID, e.Token}] {
					report(e.At, "%s renewed with token %d at %s: no Elected of its process has that token", cand, e.Token, rel(h, e.At))
				}
				continue
			}
			if open != nil && e.PID != open.PID && open.PID != 0 && e.PID != 0 {
				// Another process of this candidate: the open Term's
				// process must have been killed.
				if _, killed := killedAfter(h, cand, open.PID, open.At); killed {
					open = nil
				}
			}
			switch e.Kind {
			case Elected:
				if open != nil {
					report(e.At, "%s elected with token %d at %s while its Term with token %d (elected %s) is open",
						cand, e.Token, rel(h, e.At), open.Token, rel(h, open.At))
				}
				open = &e
			case Demoted:
				switch {
				case open == nil:
					report(e.At, "%s %s with token %d at %s without an open Elected", cand, e.Kind, e.Token, rel(h, e.At))
				case open.Token != e.Token:
					report(e.At, "%s %s with token %d at %s while its open Term has token %d",
						cand, e.Kind, e.Token, rel(h, e.At), open.Token)
				}
				open = nil
			default:
				report(e.At, "%s reported an event of kind %q at %s", cand, e.Kind, rel(h, e.At))
			}
		}
		if open != nil {
			if _, killed := killedAfter(h, cand, open.PID, open.At); !killed {
				report(open.At, "%s elected with token %d at %s never demoted, and was not killed",
					cand, open.Token, rel(h, open.At))
			}
		}
	}
	if first != nil {
		v.At, v.Detail = first.at, first.msg
		return v
	}
	v.OK = true
	v.Detail = fmt.Sprintf("%d events paired", n)
	return v
}

// LastFaultEnd is the Mono instant the last fault ended: the greatest End,
// or Start for an instantaneous fault; h.Start when there was none.
func LastFaultEnd(h *History) int64 {
	last := h.Start
	for _, f := range h.Faults {
		last = max(last, f.Start, f.End)
	}
	return last
}

// WorstFailover is the longest time with no valid Term between the end of
// one Term and the next Elected: the worst failover of the run. The wait for
// the first leader and the time after the last Term are not failovers.
func WorstFailover(h *History) time.Duration {
	d, _ := worstGap(Terms(h))
	return time.Duration(d)
}

// worstGap returns the longest gap in the union of the Terms' validity, and
// the instant it began.
func worstGap(ts []Term) (int64, int64) {
	var worst, at int64
	covered, started := int64(0), false
	for _, t := range ts {
		if t.Start >= t.End {
			continue
		}
		if started && t.Start > covered && t.Start-covered > worst {
			worst, at = t.Start-covered, covered
		}
		if !started || t.End > covered {
			covered, started = t.End, true
		}
	}
	return worst, at
}

// CheckFailover checks P6: after the last fault ended (LastFaultEnd), a
// leader exists within bound: a Term still valid at that instant, or an
// Elected event no later than bound after it. The detail also gives the
// worst failover of the run (WorstFailover). A bound that is not positive
// fails the check.
func CheckFailover(h *History, bound time.Duration) Verdict {
	v := Verdict{Name: NameFailover}
	ts := Terms(h)
	worst, worstAt := worstGap(ts)
	worstNote := fmt.Sprintf("worst failover %s", msDur(worst))
	if worst > 0 {
		worstNote += " from " + rel(h, worstAt)
	}
	if bound <= 0 {
		v.Detail = fmt.Sprintf("failover bound %v is not positive; %s", bound, worstNote)
		return v
	}
	last := LastFaultEnd(h)
	for _, t := range ts {
		if t.Start <= last && last < t.End {
			v.OK = true
			v.Detail = fmt.Sprintf("%s token %d valid when the last fault ended at %s; %s",
				t.Candidate, t.Token, rel(h, last), worstNote)
			return v
		}
	}
	var next *Event
	for i, e := range h.Events {
		if e.Kind == Elected && e.At >= last && (next == nil || e.At < next.At) {
			next = &h.Events[i]
		}
	}
	switch {
	case next != nil && next.At-last <= int64(bound):
		v.OK = true
		v.Detail = fmt.Sprintf("%s elected %s after the last fault ended at %s (bound %v); %s",
			next.Candidate, msDur(next.At-last), rel(h, last), bound, worstNote)
	case next != nil:
		v.At = last + int64(bound)
		v.Detail = fmt.Sprintf("no leader within %v of the last fault's end at %s: %s elected only %s after it; %s",
			bound, rel(h, last), next.Candidate, msDur(next.At-last), worstNote)
	default:
		v.At = last + int64(bound)
		v.Detail = fmt.Sprintf("no leader after the last fault ended at %s (bound %v, run ended %s after it); %s",
			rel(h, last), bound, msDur(h.End-last), worstNote)
	}
	return v
}

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

// SaveHistory writes h to path as JSON, replacing the file whole.
func SaveHistory(path string, h *History) error {
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return fmt.Errorf("nemesis: encode history: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("nemesis: save history: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("nemesis: save history %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("nemesis: save history %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("nemesis: save history: %w", err)
	}
	return nil
}

// LoadHistory reads a history SaveHistory wrote.
func LoadHistory(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nemesis: load history: %w", err)
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("nemesis: load history %s: %w", path, err)
	}
	return &h, nil
}
