package nemesis

import (
	"cmp"
	"slices"
)

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
			case Ended:
				if open != nil && open.Token == e.Token && e.PID == open.PID {
					closeOpen(e.At, "ended")
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
