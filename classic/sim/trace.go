package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/electkit/election/classic"
)

type recOp uint8

const (
	recAction    recOp = iota // start, crash, recover, (in)eligible
	recNet                    // partition, heal
	recSend                   // a message leaves its sender
	recDropSend               // a message is lost as it is sent
	recRecv                   // a message is delivered
	recDrop                   // a message is dropped on arrival
	recTick                   // a tick that did something
	recView                   // a node's View changed
	recSettle                 // the nodes settled
	recViolation              // a check failed
)

// record is one event, kept raw in the tail and formatted only when the
// trace is on or a violation is reported.
type record struct {
	at   int64
	op   recOp
	node classic.ID
	m    classic.Message
	v    classic.View
	note string
}

func (s *Sim) emit(r record) { s.emitIf(r, true) }

// emitIf keeps r in the tail, and in the trace if show and the level wants it.
func (s *Sim) emitIf(r record, show bool) {
	r.at = s.now
	s.tail[s.tailNext] = r
	s.tailNext++
	if s.tailNext == len(s.tail) {
		s.tailNext = 0
	}
	s.tailCount++
	if !s.traceOn || !show {
		return
	}
	if s.cfg.Trace == TraceElection {
		switch r.op {
		case recSend, recDropSend, recDrop: // recRecv and recTick: decided by the caller
			if !isElection(r.m.Kind) {
				return
			}
		}
	}
	s.trace = append(s.trace, s.format(&r))
}

// emitTick records a tick of node i that sent out or changed its View; at
// TraceElection, a tick that only did failure-detector work is not traced.
func (s *Sim) emitTick(i int32, out []classic.Message, viewChanged bool) {
	show := s.cfg.Trace != TraceElection || viewChanged || hasElection(out)
	s.emitIf(record{op: recTick, node: s.members[i].ID}, show)
}

func hasElection(out []classic.Message) bool {
	return slices.ContainsFunc(out, func(m classic.Message) bool { return isElection(m.Kind) })
}

func (s *Sim) format(r *record) string {
	var body string
	switch r.op {
	case recAction:
		body = fmt.Sprintf("N%d %s", r.node, r.note)
	case recNet:
		body = r.note
	case recSend:
		body = "send " + r.m.String()
	case recDropSend:
		body = "drop " + r.m.String() + " (" + r.note + ")"
	case recRecv:
		body = "recv " + r.m.String()
	case recDrop:
		why := r.note
		if why == "down" {
			why = fmt.Sprintf("N%d is down", r.m.To)
		}
		body = "drop " + r.m.String() + " (" + why + ")"
	case recTick:
		body = fmt.Sprintf("N%d tick", r.node)
	case recView:
		body = fmt.Sprintf("N%d view: %s", r.node, formatView(r.v))
	case recSettle:
		if r.v.HasLeader {
			body = fmt.Sprintf("settled: leader=N%d epoch=%d", r.v.Leader, r.v.Epoch)
		} else {
			body = "settled: no leader, no live node is eligible"
		}
	case recViolation:
		body = "VIOLATION " + r.note
	}
	return fmt.Sprintf("%5d  %s", r.at, body)
}

// formatView writes a View the way the trace and the views listing do.
func formatView(v classic.View) string {
	var parts []string
	if v.HasLeader {
		parts = append(parts, fmt.Sprintf("leader=N%d epoch=%d", v.Leader, v.Epoch))
	} else {
		parts = append(parts, "no leader")
		if v.Epoch != 0 {
			parts = append(parts, fmt.Sprintf("epoch=%d", v.Epoch))
		}
	}
	if v.Electing {
		parts = append(parts, "electing")
	}
	return strings.Join(parts, " ")
}

// FormatView formats a View as the trace does: "leader=N80 epoch=1",
// "no leader electing", …
func FormatView(v classic.View) string { return formatView(v) }

// Count is the number of messages of one Kind.
type Count struct {
	Kind      classic.Kind
	Sent      int64
	Delivered int64
	Dropped   int64 // lost, cut by a partition, or addressed to a crashed node
}

// Counts lists counts by Kind.
type Counts []Count

// Counts returns the message counts so far, sorted by Kind.
func (s *Sim) Counts() Counts {
	out := slices.Clone(s.counts)
	slices.SortFunc(out, func(a, b Count) int { return strings.Compare(string(a.Kind), string(b.Kind)) })
	return out
}

// Of returns the count of kind k (zero if none was sent).
func (c Counts) Of(k classic.Kind) Count {
	for _, x := range c {
		if x.Kind == k {
			return x
		}
	}
	return Count{Kind: k}
}

// Total adds up every kind; its Kind is "total".
func (c Counts) Total() Count { return c.sum("total", func(classic.Kind) bool { return true }) }

// Election adds up the election traffic, the kinds the seeds count: all but
// Heartbeat and Ack. Its Kind is "election".
func (c Counts) Election() Count { return c.sum("election", isElection) }

func (c Counts) sum(name classic.Kind, keep func(classic.Kind) bool) Count {
	t := Count{Kind: name}
	for _, x := range c {
		if keep(x.Kind) {
			t.Sent += x.Sent
			t.Delivered += x.Delivered
			t.Dropped += x.Dropped
		}
	}
	return t
}

// String is a table, one kind a line, then the election total.
func (c Counts) String() string {
	var b strings.Builder
	line := func(x Count) {
		fmt.Fprintf(&b, "%-12s sent=%d delivered=%d dropped=%d\n", x.Kind, x.Sent, x.Delivered, x.Dropped)
	}
	for _, x := range c {
		line(x)
	}
	line(c.Election())
	return strings.TrimSuffix(b.String(), "\n")
}
