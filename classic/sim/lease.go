package sim

import (
	"fmt"

	"github.com/electkit/election/classic"
)

// Lease is one master lease a node held (classic.Leaser), on the simulated
// clock: from the step it was first seen until the end it last reported
// (renewals extend it). A lease of a node that crashed keeps its end: the
// others cannot know it stopped.
type Lease struct {
	Node        classic.ID
	Term        uint64
	From, Until int64
}

type leases struct {
	all  []Lease
	open []int // per member: index in all of its current lease, -1 if none
}

// checkLease reads node i's lease after a step and checks that it overlaps
// no other node's: the Chubby safety property, "never two masters with
// overlapping leases".
func (s *Sim) checkLease(i int32) {
	l, ok := s.nodes[i].(classic.Leaser)
	if !ok {
		return
	}
	if s.leases.open == nil {
		s.leases.open = make([]int, len(s.nodes))
		for k := range s.leases.open {
			s.leases.open[k] = -1
		}
	}
	term, left := l.Lease()
	cur := s.leases.open[i]
	if left == 0 {
		if cur >= 0 && s.leases.all[cur].Until > s.now {
			s.leases.all[cur].Until = s.now // it let go
		}
		s.leases.open[i] = -1
		return
	}
	until := s.now + int64(left)
	if cur < 0 || s.leases.all[cur].Term != term || s.leases.all[cur].Until <= s.now {
		s.leases.all = append(s.leases.all, Lease{Node: s.members[i].ID, Term: term, From: s.now, Until: until})
		cur = len(s.leases.all) - 1
		s.leases.open[i] = cur
	}
	if until > s.leases.all[cur].Until {
		s.leases.all[cur].Until = until
	}
	me := s.leases.all[cur]
	for k, o := range s.leases.all {
		if k != cur && o.Node != me.Node && o.From < me.Until && me.From < o.Until {
			s.violate(CheckLease, fmt.Sprintf("N%d's lease (term %d, t=%d..%d) overlaps N%d's (term %d, t=%d..%d)",
				me.Node, me.Term, me.From, me.Until, o.Node, o.Term, o.From, o.Until))
			return
		}
	}
}

// Leases returns every master lease held so far, in the order they began.
func (s *Sim) Leases() []Lease { return append([]Lease(nil), s.leases.all...) }
