package nemesis

import (
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
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
