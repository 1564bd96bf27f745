package sim

import (
	"fmt"
	"strings"

	"github.com/electkit/election/classic"
)

// Check names what a Violation broke.
type Check string

// The checks.
const (
	// CheckSafety: two live nodes hold different leaders in one epoch.
	CheckSafety Check = "safety"
	// CheckLeader: the nodes settled on a leader that is not the best live
	// eligible node (checked only while the network is whole).
	CheckLeader Check = "leader"
	// CheckLiveness: the nodes did not settle within Config.SettleWithin
	// ticks of the last action.
	CheckLiveness Check = "liveness"
	// CheckProtocol: a node sent a message with a wrong From, or to a node
	// that does not exist.
	CheckProtocol Check = "protocol"
	// CheckLease: two nodes held master leases (classic.Leaser) that
	// overlap on the simulated clock.
	CheckLease Check = "lease"
	// CheckFencing (with Config.Fencing): an epoch named two leaders over
	// the run, or a node's epoch went back.
	CheckFencing Check = "fencing"
)

// Violation is a failed check.
type Violation struct {
	Check Check
	Step  uint64 // the step after which it was found
	At    int64  // the time
	What  string
	Tail  []string // the last events before it, oldest first
}

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sim: %s violation at step %d (t=%d): %s", v.Check, v.Step, v.At, v.What)
	if len(v.Tail) > 0 {
		b.WriteString("\ntrace tail:")
		for _, l := range v.Tail {
			b.WriteString("\n  ")
			b.WriteString(l)
		}
	}
	return b.String()
}

const maxViolations = 100

func (s *Sim) violate(c Check, what string) {
	s.check.violationCount++
	s.emit(record{op: recViolation, note: string(c) + ": " + what})
	if len(s.violations) < maxViolations {
		s.violations = append(s.violations, &Violation{Check: c, Step: s.steps, At: s.now, What: what, Tail: s.Tail()})
	}
	if s.cfg.StopOnViolation {
		s.stopped = true
	}
}

type pairKey struct {
	epoch  uint64
	leader classic.ID
}

type pairEntry struct {
	count int // live nodes holding this (epoch, leader)
	pos   int // index in checker.active
}

// checker keeps, incrementally, what the checks need: O(1) work per View
// change, and a scan of the members only when the nodes settle.
type checker struct {
	live         int // live nodes
	liveEligible int // live nodes that stand for election
	electing     int // live nodes whose View says Electing
	leaderless   int // live nodes with no leader

	pairs    map[pairKey]*pairEntry
	active   []pairKey // pairs held by at least one live node
	perEpoch map[uint64]int

	conflict      bool // set by add when an epoch gets a second leader
	conflictEpoch uint64

	settled     bool
	vacant      bool // at rest with no leader: Sim.Vacant and no election traffic
	settlement  Settlement
	bestChecked bool

	settleWithin int64
	lastAction   int64
	pendingLive  bool // a liveness deadline is running
	settledSince bool // settled at some point since lastAction

	violationCount int

	// Fencing checks.
	maxEpoch    []uint64 // per member: the highest epoch its Views held
	epochOwner  map[uint64]classic.ID
	epochReused map[uint64]bool
}

func (c *checker) init(s *Sim) {
	c.pairs = make(map[pairKey]*pairEntry)
	c.perEpoch = make(map[uint64]int)
	c.settleWithin = s.cfg.SettleWithin
	if s.cfg.Fencing {
		c.maxEpoch = make([]uint64, len(s.members))
		c.epochOwner = make(map[uint64]classic.ID)
		c.epochReused = make(map[uint64]bool)
	}
}

func (c *checker) add(v classic.View) {
	if v.Electing {
		c.electing++
	}
	if !v.HasLeader {
		c.leaderless++
		return
	}
	k := pairKey{v.Epoch, v.Leader}
	e := c.pairs[k]
	if e == nil {
		e = &pairEntry{pos: len(c.active)}
		c.pairs[k] = e
		c.active = append(c.active, k)
		c.perEpoch[v.Epoch]++
		if c.perEpoch[v.Epoch] > 1 {
			c.conflict = true
			c.conflictEpoch = v.Epoch
		}
	}
	e.count++
}

func (c *checker) remove(v classic.View) {
	if v.Electing {
		c.electing--
	}
	if !v.HasLeader {
		c.leaderless--
		return
	}
	k := pairKey{v.Epoch, v.Leader}
	e := c.pairs[k]
	e.count--
	if e.count > 0 {
		return
	}
	last := len(c.active) - 1
	moved := c.active[last]
	c.active[e.pos] = moved
	c.pairs[moved].pos = e.pos
	c.active = c.active[:last]
	delete(c.pairs, k)
	if c.perEpoch[v.Epoch]--; c.perEpoch[v.Epoch] == 0 {
		delete(c.perEpoch, v.Epoch)
	}
}

func (s *Sim) safetyViolation(epoch uint64) {
	var parts []string
	for _, k := range s.check.active { // active's order is deterministic
		if k.epoch == epoch {
			parts = append(parts, fmt.Sprintf("N%d (held by %d)", k.leader, s.check.pairs[k].count))
		}
	}
	s.violate(CheckSafety, fmt.Sprintf("epoch %d has %d leaders among live nodes: %s",
		epoch, len(parts), strings.Join(parts, ", ")))
}

// disturbed notes an action: the liveness clock restarts, and the next
// settlement gets its leader checked again.
func (c *checker) disturbed(s *Sim) {
	c.lastAction = s.now
	c.pendingLive = c.settleWithin > 0
	c.settledSince = false
	c.bestChecked = false
}

// after runs after every step.
func (c *checker) after(s *Sim) {
	st, ok := c.compute(s)
	if !ok {
		c.settled = false
		vacant := s.inFlightElect == 0 && s.Vacant()
		if vacant {
			c.settledSince = true
			if !c.vacant {
				s.emit(record{op: recSettle})
			}
		}
		c.vacant = vacant
		return
	}
	c.vacant = false
	c.settledSince = true
	if !c.settled || st.Leader != c.settlement.Leader || st.Epoch != c.settlement.Epoch {
		st.At = s.now
		c.settlement = st
		c.settled = true
		c.bestChecked = false
		s.emit(record{op: recSettle, v: classic.View{Leader: st.Leader, Epoch: st.Epoch, HasLeader: true}})
	}
	if !c.bestChecked && !s.divided() {
		c.bestChecked = true
		best, ok := s.bestLive()
		switch {
		case !ok:
			s.violate(CheckLeader, fmt.Sprintf("settled on N%d in epoch %d, but no live node is eligible",
				st.Leader, st.Epoch))
		case s.cfg.AnyLeader && !s.Eligible(st.Leader):
			s.violate(CheckLeader, fmt.Sprintf("settled on N%d in epoch %d, which is not eligible", st.Leader, st.Epoch))
		case best.ID != st.Leader && !s.cfg.AnyLeader:
			s.violate(CheckLeader, fmt.Sprintf("settled on N%d in epoch %d, but the best live eligible node is %v",
				st.Leader, st.Epoch, best.Rank()))
		}
	}
}

func (c *checker) compute(s *Sim) (Settlement, bool) {
	if c.live == 0 || s.inFlightElect > 0 || c.electing > 0 || c.leaderless > 0 || len(c.active) != 1 {
		return Settlement{}, false
	}
	k := c.active[0]
	i, ok := s.index.get(k.leader)
	if !ok || !s.up[i] {
		return Settlement{}, false
	}
	return Settlement{Leader: k.leader, Epoch: k.epoch}, true
}

// bestLive returns the best live eligible member.
func (s *Sim) bestLive() (classic.Member, bool) {
	var best classic.Member
	found := false
	for i, m := range s.members {
		if s.up[i] && s.eligible[i] && (!found || best.Rank().Less(m.Rank())) {
			best, found = m, true
		}
	}
	return best, found
}

// deadline runs when the clock is about to move to at.
func (c *checker) deadline(s *Sim, at int64) {
	if c.pendingLive && at > c.lastAction+c.settleWithin {
		c.pendingLive = false
		s.now = c.lastAction + c.settleWithin // report it at the deadline
		c.judgeLiveness(s, fmt.Sprintf("not settled within %d ticks of the last action at t=%d",
			c.settleWithin, c.lastAction))
	}
}

// finish runs when a run stops because it is quiet or idle.
func (c *checker) finish(s *Sim) {
	if !c.pendingLive {
		return
	}
	if c.settled || c.vacant {
		c.pendingLive = false
		return
	}
	if s.wheel.n == 0 && s.timers.len() == 0 {
		c.pendingLive = false
		c.judgeLiveness(s, fmt.Sprintf("nothing is left to happen and the nodes have not settled since the last action at t=%d",
			c.lastAction))
	}
}

func (c *checker) judgeLiveness(s *Sim, what string) {
	if c.settledSince || s.divided() {
		return
	}
	s.violate(CheckLiveness, what+"; "+s.describeViews())
}

// describeViews summarizes the live nodes' views for a report (at most a
// dozen nodes are named).
func (s *Sim) describeViews() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d live (%d eligible), %d electing, %d without leader, %d (epoch, leader) pairs, %d election messages in flight",
		s.check.live, s.check.liveEligible, s.check.electing, s.check.leaderless, len(s.check.active), s.inFlightElect)
	n := 0
	for i, m := range s.members {
		if !s.up[i] {
			continue
		}
		if n == 12 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, "; N%d: %s", m.ID, formatView(s.views[i]))
		n++
	}
	return b.String()
}
