package nemesis

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
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

// CheckValidTerms checks P3: no two candidates (or two processes of one
// candidate ID) hold valid Terms at the same instant (see Term for when a Term is valid). It reports the
// overlap that begins first, with both candidates, tokens and instants.
func CheckValidTerms(h *History) Verdict { return CheckValidTermsGrace(h, 0) }

// CheckValidTermsGrace is CheckValidTerms that lets one overlap pass: a
// Term that begins once another client has sent its request removing the
// leader's key (an operator fault's Start, up to grace after its End) and
// overlaps a Term that ended at most grace after the store answered that
// request (the fault's Acked; its Start when Acked is 0). The old leader
// and its successor learn of the removal from the same store event, and
// nothing orders two processes' handling of it (see backend/etcd's doc,
// "Other clients of the store"): such overlaps are counted and reported;
// fencing is judged by the linearizability check. A longer overlap, one
// whose old leader learned of the removal later, or one with no operator
// fault, is a violation as ever.
func CheckValidTermsGrace(h *History, grace time.Duration) Verdict {
	v := Verdict{Name: NameValidTerms}
	ts := Terms(h)
	found := false
	var a, b Term
	excused, longest := 0, int64(0)
	// operatorRace reports whether u's overlap with t, an older Term, is
	// another client's doing (an operator fault removed t's key, and u was
	// elected on it) and lasted at most the grace, and how long it lasted.
	// A Term whose process was killed counts as ending at the kill: its
	// deadline stands against a successor elected on the lease's expiry,
	// but this successor was elected on the removal, whose event would
	// have ended t within the grace had its process lived.
	operatorRace := func(t, u Term) (bool, int64) {
		g := int64(grace)
		end := t.End
		if k, killed := killedAfter(h, t.Candidate, t.PID, t.Start); killed && strings.HasPrefix(t.EndedBy, "killed") && k < end {
			end = k
		}
		overlap := min(end, u.End) - u.Start
		if g <= 0 || overlap > g {
			return false, 0
		}
		for _, f := range h.Faults {
			acked := max(f.Acked, f.Start)
			if f.Kind == "operator" && f.Start <= u.Start && u.Start <= f.End+g && end-acked <= g && end >= f.Start {
				return true, max(overlap, 0)
			}
		}
		return false, 0
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
			if ok, overlap := operatorRace(t, u); ok {
				excused++
				longest = max(longest, overlap)
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
			if e.Kind == Renewed || e.Kind == Ended {
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
