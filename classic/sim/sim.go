// Package sim runs the state machines of package classic deterministically:
// a discrete-event network simulator driven by one seed.
//
// The caller builds the nodes; the simulator owns time (an abstract tick),
// the network (per-message delays drawn from a range, loss, partitions) and
// the faults (crashes, recoveries, partitions, heals, eligibility changes),
// either scheduled or drawn at random from the seed. It counts messages by
// Kind, records a readable trace, and checks after every step:
//
//   - safety: no two live nodes that hold a leader in the same epoch name
//     different leaders;
//   - when the run settles (no election traffic in flight, every live node
//     knows a live leader, none is electing, and they all agree), the agreed
//     leader is the best live eligible node by classic.Rank. This one is
//     checked only while the network is not partitioned;
//   - liveness, when Config.SettleWithin is set: after the last action
//     (fault, Start, eligibility change), the nodes settle within that many
//     ticks, or, when no live node is eligible, all come to believe in no
//     leader (Vacant);
//   - with Config.Fencing, that epochs can serve as fencing tokens: an epoch
//     never names two leaders over the whole run, and no node's epoch goes
//     back;
//   - that nodes send from their own ID to existing nodes.
//
// A violation is recorded with the step, the time and the last events
// (kept raw even when tracing is off, formatted only then); see Err and
// Violations.
//
// Guarantees: the same seed, nodes and configuration give the same run, event
// for event and trace line for trace line. There are no goroutines, no clock
// and no map iteration anywhere in what a run does. Events are ordered by
// (time, sequence number), the sequence number being the order in which they
// were scheduled.
//
// Non-guarantees: the simulator only sees Views; a node that believes
// nothing wrong but acts wrongly is caught only when some View shows it. The
// classic ring and bully have no quorum, so a partition can give two leaders
// in one epoch: the safety check reports it, as it should.
//
// Cost: in-flight messages live in a timing wheel of pointer-free events
// (one slot per possible delay), so a send or a delivery allocates nothing
// and costs the garbage collector nothing; the checks are incremental, O(1)
// per View change, with one scan of the members per settlement. With
// NoTicks a run costs only its messages: a million-node ring election
// (3 million messages) runs in about a second. With ticks, every live node
// is ticked every tick, which is what runs with timeouts need.
package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/electkit/election/classic"
)

// Sentinel errors. The methods wrap them with the node or value at fault.
var (
	ErrConfig      = errors.New("sim: invalid configuration")
	ErrUnknownNode = errors.New("sim: unknown node")
	ErrNodeDown    = errors.New("sim: node is down")
	ErrNodeUp      = errors.New("sim: node is up")
)

// TraceLevel says which events the trace records.
type TraceLevel uint8

const (
	// TraceOff records nothing but the short tail kept for violation reports.
	// It is the fastest: no string is formatted per event.
	TraceOff TraceLevel = iota
	// TraceElection records everything but failure-detector traffic:
	// Heartbeat and Ack messages (but for a delivery that sent election
	// traffic or changed a View), and ticks that did nothing else.
	TraceElection
	// TraceAll records every event that did something.
	TraceAll
)

// Config configures a run. Its zero value ticks every live node and
// delivers every message in zero ticks, and lacks only MaxTime.
type Config struct {
	// Seed drives every random draw: delays, loss and Chaos.
	Seed uint64
	// MinDelay and MaxDelay bound the delay of a message in ticks; each
	// message's delay is drawn uniformly from [MinDelay, MaxDelay]. A message
	// sent at time t with delay 0 is delivered at t, after the events
	// already scheduled for t.
	MinDelay, MaxDelay int64
	// DropProb is the probability that a message is lost, for the whole run.
	DropProb float64
	// NoTicks turns ticks off: nodes are never ticked, so no timeout ever
	// fires. For pure message-count runs (and big rings); runs that rely on
	// failure detectors or timeouts must leave it false.
	NoTicks bool
	// Trace selects what Trace records.
	Trace TraceLevel
	// Schedule lists actions to apply at given times: who calls Start and
	// when, crashes, recoveries, partitions, heals, eligibility changes.
	Schedule []Action
	// Chaos, if set, draws faults at random from the seed.
	Chaos *Chaos
	// SettleWithin, if positive, is the liveness bound: after the last
	// action (scheduled, drawn by Chaos, or made through a method), the
	// nodes must settle within that many ticks — or, when no live node is
	// eligible, become Vacant. It is not checked while the network is
	// partitioned.
	SettleWithin int64
	// MaxTime stops Run before any event later than it. It is required
	// unless NoTicks is set: with ticks, time never runs out of events.
	MaxTime int64
	// Fencing adds the checks that make epochs usable as fencing tokens
	// (what backend/inmem relies on): an epoch never names two different
	// leaders over the whole run, even at different times or across a
	// partition, and no node's epoch ever goes back (crashes included).
	Fencing bool
	// StopOnViolation makes Run and RunUntil return at the first violation.
	StopOnViolation bool
	// AnyLeader: the algorithm elects some live eligible node, not
	// necessarily the best (Chubby: whoever wins a majority first, and a
	// master is not preempted while it keeps its lease). The leader check
	// then only asks that the leader be eligible.
	AnyLeader bool
	// Topology, if set, is who can send to whom (see topology.go): a
	// message along no edge is dropped as it is sent. Nil: everyone.
	Topology classic.Graph
	// TailLen is how many recent events a violation report shows; 0 means 24.
	TailLen int
	// Record keeps every message and action as data (Sim.Record), for
	// pictures of the run (WriteSVG). It costs memory per message.
	Record bool
}

// Validate reports the first invalid field of c, naming it.
func (c Config) Validate() error {
	switch {
	case c.MinDelay < 0:
		return fmt.Errorf("%w: MinDelay %d is negative", ErrConfig, c.MinDelay)
	case c.MaxDelay < c.MinDelay:
		return fmt.Errorf("%w: MaxDelay %d is below MinDelay %d", ErrConfig, c.MaxDelay, c.MinDelay)
	case c.MaxDelay > 1<<20:
		return fmt.Errorf("%w: MaxDelay %d is above 2^20 ticks", ErrConfig, c.MaxDelay)
	case !(c.DropProb >= 0 && c.DropProb < 1):
		return fmt.Errorf("%w: DropProb %v is not in [0, 1)", ErrConfig, c.DropProb)
	case c.Trace > TraceAll:
		return fmt.Errorf("%w: Trace level %d is unknown", ErrConfig, c.Trace)
	case c.SettleWithin < 0:
		return fmt.Errorf("%w: SettleWithin %d is negative", ErrConfig, c.SettleWithin)
	case c.MaxTime < 0:
		return fmt.Errorf("%w: MaxTime %d is negative", ErrConfig, c.MaxTime)
	case c.MaxTime == 0 && !c.NoTicks:
		return fmt.Errorf("%w: MaxTime is 0 but nodes tick: a Run would never end", ErrConfig)
	case c.TailLen < 0:
		return fmt.Errorf("%w: TailLen %d is negative", ErrConfig, c.TailLen)
	}
	for i, a := range c.Schedule {
		if a.At < 0 {
			return fmt.Errorf("%w: Schedule[%d] (%v) is at negative time", ErrConfig, i, a)
		}
		if a.Op < OpStart || a.Op > OpIneligible {
			return fmt.Errorf("%w: Schedule[%d] has unknown op %d", ErrConfig, i, a.Op)
		}
	}
	if c.Chaos != nil {
		if err := c.Chaos.validate(); err != nil {
			return err
		}
	}
	return nil
}

// Op is what an Action does.
type Op uint8

// The actions.
const (
	OpStart      Op = iota + 1 // the node calls Start: it initiates an election
	OpCrash                    // the node crashes: it gets nothing until it recovers
	OpRecover                  // the node recovers: it gets Recover()
	OpPartition                // the network splits into Groups
	OpHeal                     // the partition ends
	OpEligible                 // SetEligible(true)
	OpIneligible               // SetEligible(false)
)

var opNames = [...]string{"?", "start", "crash", "recover", "partition", "heal", "eligible", "ineligible"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Action is one scheduled action.
type Action struct {
	At int64
	Op Op
	ID classic.ID // the node, for every Op but OpPartition and OpHeal
	// Groups, for OpPartition: messages pass only within a group. Nodes
	// named in no group form one more group together.
	Groups [][]classic.ID
}

func (a Action) String() string {
	switch a.Op {
	case OpPartition:
		return fmt.Sprintf("t=%d partition %s", a.At, formatGroups(a.Groups))
	case OpHeal:
		return fmt.Sprintf("t=%d heal", a.At)
	}
	return fmt.Sprintf("t=%d N%d %v", a.At, a.ID, a.Op)
}

func formatGroups(groups [][]classic.ID) string {
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('{')
		for j, id := range g {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "N%d", id)
		}
		b.WriteByte('}')
	}
	return b.String()
}

// Stop says why Run or RunUntil returned.
type Stop uint8

const (
	// StopQuiet: nothing is scheduled, no election traffic is in flight and
	// the live nodes have settled (or are Vacant).
	StopQuiet Stop = iota
	// StopIdle: nothing at all is left to happen, and the nodes have not
	// settled (without ticks, no timeout will ever fire).
	StopIdle
	// StopTime: the next event is past MaxTime (Run) or the given time
	// (RunUntil).
	StopTime
	// StopViolation: a check failed and Config.StopOnViolation is set.
	StopViolation
)

func (s Stop) String() string {
	switch s {
	case StopQuiet:
		return "quiet"
	case StopIdle:
		return "idle"
	case StopTime:
		return "time"
	case StopViolation:
		return "violation"
	}
	return fmt.Sprintf("stop(%d)", uint8(s))
}

// Settlement is an agreement of every live node on one live leader.
type Settlement struct {
	Leader classic.ID
	Epoch  uint64
	At     int64 // the time it was reached
}

// Sim is one simulated run. It is not safe for concurrent use.
type Sim struct {
	cfg      Config
	net      *rand.Rand // delays and loss
	chaosRnd *rand.Rand // Chaos's choices

	now   int64
	seq   uint64
	steps uint64

	members  []classic.Member
	nodes    []classic.Node
	index    idIndex
	up       []bool
	eligible []bool
	group    []int32 // partition group per node; all 0 when healed
	views    []classic.View
	parted   bool

	wheel   wheel
	timers  timerHeap
	actions []Action // payloads of scheduled actions, indexed by timer.ref
	pending int      // actions and chaos events in timers (ticks excluded)

	topo topology // Config.Topology, see topology.go

	leases leases // Chubby's master leases, see lease.go

	counts         []Count
	lists          [][]classic.Rank // LCR member lists of messages in flight (wire.list)
	freeLists      []int32
	inFlight       int64
	inFlightElect  int64
	chaosDropUntil int64

	check checker
	rec   Recording

	traceOn   bool
	trace     []string
	tail      []record
	tailNext  int
	tailCount uint64

	violations []*Violation
	stopped    bool // a violation happened and StopOnViolation is set
}

// New makes a simulator over nodes, which the caller has built: nodes[i]
// must have ID members[i].ID, and members gives every node's election
// attribute. Order matters only for determinism: ticks go in this order.
func New(members []classic.Member, nodes []classic.Node, cfg Config) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: no members", ErrConfig)
	}
	if len(members) != len(nodes) {
		return nil, fmt.Errorf("%w: %d members but %d nodes", ErrConfig, len(members), len(nodes))
	}
	if len(members) > 1<<31-1 {
		return nil, fmt.Errorf("%w: %d members is too many", ErrConfig, len(members))
	}
	n := len(members)
	s := &Sim{
		cfg:      cfg,
		net:      rand.New(rand.NewPCG(cfg.Seed, 0x6e6574)),   // "net"
		chaosRnd: rand.New(rand.NewPCG(cfg.Seed, 0x63686173)), // "chas"
		members:  slices.Clone(members),
		nodes:    slices.Clone(nodes),
		index:    newIDIndex(members),
		up:       make([]bool, n),
		eligible: make([]bool, n),
		group:    make([]int32, n),
		views:    make([]classic.View, n),
		traceOn:  cfg.Trace != TraceOff,
	}
	for i, m := range members {
		if nodes[i] == nil {
			return nil, fmt.Errorf("%w: nodes[%d] is nil", ErrConfig, i)
		}
		if got := nodes[i].ID(); got != m.ID {
			return nil, fmt.Errorf("%w: nodes[%d] has ID N%d, members[%d] N%d", ErrConfig, i, got, i, m.ID)
		}
		if !s.index.add(m.ID, int32(i)) {
			return nil, fmt.Errorf("%w: N%d is listed twice", ErrConfig, m.ID)
		}
		s.up[i] = true
		s.eligible[i] = true
	}
	for i, a := range cfg.Schedule {
		if err := s.checkAction(a); err != nil {
			return nil, fmt.Errorf("%w: Schedule[%d]: %w", ErrConfig, i, err)
		}
	}
	if err := s.initTopology(); err != nil {
		return nil, err
	}
	tail := cfg.TailLen
	if tail == 0 {
		tail = 24
	}
	s.tail = make([]record, tail)
	s.wheel.init(cfg.MaxDelay + 1)
	s.check.init(s)
	for i := range nodes {
		s.views[i] = nodes[i].View()
		s.check.add(s.views[i])
		s.fence(int32(i), s.views[i])
	}
	s.check.live, s.check.liveEligible = n, n
	s.noteConflict()
	for _, a := range cfg.Schedule {
		s.schedule(a)
	}
	if c := cfg.Chaos; c != nil {
		if c.Until > c.From {
			s.pushTimer(c.From+s.chaosGap(), evChaos, 0)
			s.pending++
		}
		s.chaosDropUntil = c.Until
	}
	if !cfg.NoTicks {
		s.pushTimer(1, evTick, 0)
	}
	s.afterStep()
	return s, nil
}

func (s *Sim) checkAction(a Action) error {
	switch a.Op {
	case OpPartition:
		seen := make(map[classic.ID]bool)
		for _, g := range a.Groups {
			for _, id := range g {
				if _, ok := s.index.get(id); !ok {
					return fmt.Errorf("%w N%d in a partition group", ErrUnknownNode, id)
				}
				if seen[id] {
					return fmt.Errorf("%w: N%d is in two partition groups", ErrConfig, id)
				}
				seen[id] = true
			}
		}
	case OpHeal:
	default:
		if _, ok := s.index.get(a.ID); !ok {
			return fmt.Errorf("%w N%d", ErrUnknownNode, a.ID)
		}
	}
	return nil
}

func (s *Sim) schedule(a Action) {
	s.actions = append(s.actions, a)
	s.pushTimer(a.At, evAction, int32(len(s.actions)-1))
	s.pending++
}

// Now is the current time in ticks.
func (s *Sim) Now() int64 { return s.now }

// Steps is how many steps have run: deliveries, ticks that did something,
// actions.
func (s *Sim) Steps() uint64 { return s.steps }

// Members returns a copy of the members, in the order given to New.
func (s *Sim) Members() []classic.Member { return slices.Clone(s.members) }

// View returns what node id believes, and whether it is up. A crashed node's
// View is the last one it had.
func (s *Sim) View(id classic.ID) (v classic.View, up bool, err error) {
	i, ok := s.index.get(id)
	if !ok {
		return classic.View{}, false, fmt.Errorf("%w N%d", ErrUnknownNode, id)
	}
	return s.views[i], s.up[i], nil
}

// Eligible reports whether node id stands for election (as the simulator
// told it through SetEligible; every node starts eligible).
func (s *Sim) Eligible(id classic.ID) bool {
	i, ok := s.index.get(id)
	return ok && s.eligible[i]
}

// Partitioned reports whether the network is split.
func (s *Sim) Partitioned() bool { return s.parted }

// InFlight is the number of messages sent and neither delivered nor
// dropped yet.
func (s *Sim) InFlight() int64 { return s.inFlight }

// Settled returns the current agreement, if the nodes have settled: every
// live node knows the same live leader in the same epoch, none is electing,
// and no election traffic is in flight.
func (s *Sim) Settled() (Settlement, bool) {
	return s.check.settlement, s.check.settled
}

// Err returns the first violation, or nil. Its message says how many more
// there were; Violations has them all (up to 100).
func (s *Sim) Err() error {
	switch len(s.violations) {
	case 0:
		return nil
	case 1:
		return s.violations[0]
	}
	return fmt.Errorf("%w\n(and %d more violations)", s.violations[0], s.check.violationCount-1)
}

// Violations returns the violations found so far, in order (at most 100
// are kept).
func (s *Sim) Violations() []*Violation { return s.violations }

// Trace returns the trace lines recorded so far (none with TraceOff):
// "<time>  <what happened>", one event a line. The slice is read-only.
func (s *Sim) Trace() []string { return s.trace[:len(s.trace):len(s.trace)] }

// Tail formats the last events (kept even with TraceOff), oldest first.
func (s *Sim) Tail() []string {
	n := len(s.tail)
	if s.tailCount < uint64(n) {
		n = int(s.tailCount)
	}
	out := make([]string, 0, n)
	for k := range n {
		j := (s.tailNext - n + k + len(s.tail)) % len(s.tail)
		out = append(out, s.format(&s.tail[j]))
	}
	return out
}

// Start makes node id initiate an election now.
func (s *Sim) Start(id classic.ID) error { return s.apply(Action{At: s.now, Op: OpStart, ID: id}) }

// Crash crashes node id now: from now on it gets no message and no tick,
// and messages in flight to it are dropped on arrival.
func (s *Sim) Crash(id classic.ID) error { return s.apply(Action{At: s.now, Op: OpCrash, ID: id}) }

// Recover restarts the crashed node id now: it gets Recover().
func (s *Sim) Recover(id classic.ID) error {
	return s.apply(Action{At: s.now, Op: OpRecover, ID: id})
}

// SetEligible makes node id stand for election or not, now.
func (s *Sim) SetEligible(id classic.ID, eligible bool) error {
	op := OpIneligible
	if eligible {
		op = OpEligible
	}
	return s.apply(Action{At: s.now, Op: op, ID: id})
}

// Partition splits the network now: messages pass only within a group, and
// nodes named in no group form one more group together. Messages already in
// flight between groups are dropped on arrival.
func (s *Sim) Partition(groups ...[]classic.ID) error {
	return s.apply(Action{At: s.now, Op: OpPartition, Groups: groups})
}

// Heal ends the partition now.
func (s *Sim) Heal() error { return s.apply(Action{At: s.now, Op: OpHeal}) }

// Schedule adds an action for a later time (or now).
func (s *Sim) Schedule(a Action) error {
	if a.At < s.now {
		return fmt.Errorf("%w: %v is in the past (now t=%d)", ErrConfig, a, s.now)
	}
	if a.Op < OpStart || a.Op > OpIneligible {
		return fmt.Errorf("%w: unknown op %d", ErrConfig, a.Op)
	}
	if err := s.checkAction(a); err != nil {
		return err
	}
	s.schedule(a)
	return nil
}

func (s *Sim) apply(a Action) error {
	if err := s.checkAction(a); err != nil {
		return err
	}
	if err := s.act(a, true); err != nil {
		return err
	}
	s.afterStep()
	return nil
}

// act carries out a; with strict, a crash of a crashed node (and the like)
// is an error, otherwise it is traced as ignored.
func (s *Sim) act(a Action, strict bool) error {
	s.steps++
	i := int32(-1)
	if a.Op != OpPartition && a.Op != OpHeal {
		i, _ = s.index.get(a.ID)
	}
	var err error
	switch a.Op {
	case OpStart, OpEligible, OpIneligible:
		if !s.up[i] {
			err = fmt.Errorf("%w: N%d cannot %v", ErrNodeDown, a.ID, a.Op)
		}
	case OpCrash:
		if !s.up[i] {
			err = fmt.Errorf("%w: N%d already", ErrNodeDown, a.ID)
		}
	case OpRecover:
		if s.up[i] {
			err = fmt.Errorf("%w: N%d cannot recover", ErrNodeUp, a.ID)
		}
	}
	if err != nil {
		if strict {
			return err
		}
		state := "down"
		if s.up[i] {
			state = "up"
		}
		s.emit(record{op: recAction, node: a.ID, note: a.Op.String() + " ignored: node is " + state})
		return nil
	}
	s.check.disturbed(s)
	s.recordAction(a)
	switch a.Op {
	case OpStart:
		s.emit(record{op: recAction, node: a.ID, note: "start"})
		s.send(i, s.nodes[i].Start())
		s.refresh(i)
	case OpCrash:
		s.emit(record{op: recAction, node: a.ID, note: "crash"})
		s.up[i] = false
		s.check.remove(s.views[i])
		s.check.live--
		if s.eligible[i] {
			s.check.liveEligible--
		}
		s.resplit()
	case OpRecover:
		s.emit(record{op: recAction, node: a.ID, note: "recover"})
		s.up[i] = true
		s.check.live++
		if s.eligible[i] {
			s.check.liveEligible++
		}
		s.resplit()
		s.send(i, s.nodes[i].Recover())
		// The node left the checks when it crashed: it comes back with
		// whatever it believes now, changed or not.
		v := s.nodes[i].View()
		if v != s.views[i] {
			s.views[i] = v
			s.emit(record{op: recView, node: a.ID, v: v})
		}
		s.check.add(v)
		s.noteConflict()
		s.fence(i, v)
	case OpEligible, OpIneligible:
		el := a.Op == OpEligible
		if el != s.eligible[i] {
			if el {
				s.check.liveEligible++
			} else {
				s.check.liveEligible--
			}
		}
		s.eligible[i] = el
		s.emit(record{op: recAction, node: a.ID, note: a.Op.String()})
		s.send(i, s.nodes[i].SetEligible(el))
		s.refresh(i)
	case OpPartition:
		for k := range s.group {
			s.group[k] = 0
		}
		for g, ids := range a.Groups {
			for _, id := range ids {
				j, _ := s.index.get(id)
				s.group[j] = int32(g + 1)
			}
		}
		s.parted = true
		s.emit(record{op: recNet, note: "partition " + formatGroups(a.Groups)})
	case OpHeal:
		for k := range s.group {
			s.group[k] = 0
		}
		s.parted = false
		s.emit(record{op: recNet, note: "heal"})
	}
	return nil
}

// send hands the messages node i returned to the network.
func (s *Sim) send(i int32, out []classic.Message) {
	from := s.members[i].ID
	for k := range out {
		m := &out[k]
		ki := s.kind(m.Kind)
		c := &s.counts[ki]
		c.Sent++
		if m.From != from {
			s.violate(CheckProtocol, fmt.Sprintf("N%d sent a message with From N%d: %v", from, m.From, *m))
			c.Dropped++
			continue
		}
		j, ok := s.index.get(m.To)
		if !ok {
			s.violate(CheckProtocol, fmt.Sprintf("N%d sent to unknown node N%d: %v", from, m.To, *m))
			c.Dropped++
			continue
		}
		if s.parted && s.group[i] != s.group[j] {
			c.Dropped++
			s.emit(record{op: recDropSend, m: *m, note: "partition"})
			s.recordSend(m, s.now, "partition")
			continue
		}
		if !s.linked(i, j) {
			c.Dropped++
			s.emit(record{op: recDropSend, m: *m, note: "no link"})
			s.recordSend(m, s.now, "no link")
			continue
		}
		if p := s.dropProb(); p > 0 && s.net.Float64() < p {
			c.Dropped++
			s.emit(record{op: recDropSend, m: *m, note: "lost"})
			s.recordSend(m, s.now, "lost")
			continue
		}
		d := s.cfg.MinDelay
		if s.cfg.MaxDelay > d {
			d += s.net.Int64N(s.cfg.MaxDelay - d + 1)
		}
		s.seq++
		e := msgEvent{at: s.now + d, seq: s.seq, from: i, to: j, kind: int32(ki), w: s.pack(m), rec: s.recordSend(m, s.now+d, "")}
		s.wheel.push(&e)
		s.inFlight++
		if isElection(m.Kind) {
			s.inFlightElect++
		}
		s.emit(record{op: recSend, m: *m})
	}
}

func (s *Sim) dropProb() float64 {
	p := s.cfg.DropProb
	if c := s.cfg.Chaos; c != nil && c.DropProb > 0 && s.now >= c.From && s.now < s.chaosDropUntil {
		// Independent losses: lost by either.
		p = 1 - (1-p)*(1-c.DropProb)
	}
	return p
}

// isElection reports whether k is election traffic, as opposed to the
// failure detector's.
func isElection(k classic.Kind) bool { return k != classic.Heartbeat && k != classic.Ack }

// refresh reads node i's View after a call and updates the checks.
func (s *Sim) refresh(i int32) { s.refreshWith(i, s.nodes[i].View()) }

func (s *Sim) refreshWith(i int32, v classic.View) {
	s.checkLease(i) // lease.go
	old := s.views[i]
	if v == old {
		return
	}
	s.views[i] = v
	s.emit(record{op: recView, node: s.members[i].ID, v: v})
	if s.up[i] {
		s.check.remove(old)
		s.check.add(v)
		s.noteConflict()
		s.fence(i, v)
	}
}

// fence runs the Fencing checks on node i's new View.
func (s *Sim) fence(i int32, v classic.View) {
	if !s.cfg.Fencing || !v.HasLeader {
		return
	}
	c := &s.check
	if v.Epoch < c.maxEpoch[i] {
		s.violate(CheckFencing, fmt.Sprintf("N%d went back from epoch %d to epoch %d (leader N%d)",
			s.members[i].ID, c.maxEpoch[i], v.Epoch, v.Leader))
	}
	c.maxEpoch[i] = max(c.maxEpoch[i], v.Epoch)
	first, seen := c.epochOwner[v.Epoch]
	switch {
	case !seen:
		c.epochOwner[v.Epoch] = v.Leader
	case first != v.Leader && !c.epochReused[v.Epoch]:
		c.epochReused[v.Epoch] = true
		s.violate(CheckFencing, fmt.Sprintf("epoch %d was N%d's and now N%d's too (seen by N%d)",
			v.Epoch, first, v.Leader, s.members[i].ID))
	}
}

func (s *Sim) noteConflict() {
	if s.check.conflict {
		s.check.conflict = false
		s.safetyViolation(s.check.conflictEpoch)
	}
}

// Step processes the next event (a delivery, a round of ticks, an action)
// and reports whether there was one.
func (s *Sim) Step() bool {
	m, at, fromWheel := s.peek()
	if !fromWheel && s.timers.len() == 0 {
		return false
	}
	s.advance(at)
	if fromWheel {
		e := *m // copy: the slot is reused once popped
		s.wheel.pop()
		s.deliver(&e)
	} else {
		t := s.timers.pop()
		switch t.kind {
		case evTick:
			s.pushTimer(s.now+1, evTick, 0)
			s.tickAll()
			return true // afterStep ran per node
		case evAction:
			s.pending--
			_ = s.act(s.actions[t.ref], false)
		case evChaos:
			s.pending--
			s.chaos()
		}
	}
	s.afterStep()
	return true
}

// peek returns the next event's time, and the message if it is a delivery.
// Messages and timers interleave by (time, sequence number).
func (s *Sim) peek() (m *msgEvent, at int64, fromWheel bool) {
	m = s.wheel.peek()
	if m != nil {
		if s.timers.len() == 0 || m.at < s.timers.top().at || (m.at == s.timers.top().at && m.seq < s.timers.top().seq) {
			return m, m.at, true
		}
	}
	if s.timers.len() == 0 {
		return nil, 0, false
	}
	return nil, s.timers.top().at, false
}

func (s *Sim) advance(at int64) {
	if at > s.now {
		s.check.deadline(s, at)
		s.now = at
	}
}

func (s *Sim) deliver(e *msgEvent) {
	c := &s.counts[e.kind]
	m := s.unpack(&e.w, c.Kind)
	s.inFlight--
	if isElection(m.Kind) {
		s.inFlightElect--
	}
	s.steps++
	j := e.to
	if !s.up[j] {
		c.Dropped++
		s.emit(record{op: recDrop, m: m, note: "down"})
		s.recordDrop(e.rec, "down")
		return
	}
	if s.parted && s.group[j] != s.group[e.from] {
		c.Dropped++
		s.emit(record{op: recDrop, m: m, note: "partition"})
		s.recordDrop(e.rec, "partition")
		return
	}
	c.Delivered++
	out := s.nodes[j].Step(m)
	v := s.nodes[j].View()
	// At TraceElection, failure-detector traffic shows only when it did
	// something visible: sent election traffic or changed a View.
	show := s.cfg.Trace != TraceElection || isElection(m.Kind) || v != s.views[j] || hasElection(out)
	s.emitIf(record{op: recRecv, m: m}, show)
	s.send(j, out)
	s.refreshWith(j, v)
}

func (s *Sim) tickAll() {
	for i := range s.nodes {
		if !s.up[i] {
			continue
		}
		i := int32(i)
		out := s.nodes[i].Tick()
		v := s.nodes[i].View()
		if len(out) == 0 && v == s.views[i] {
			continue
		}
		s.steps++
		s.emitTick(i, out, v != s.views[i])
		s.send(i, out)
		s.refreshWith(i, v)
		s.afterStep()
		if s.stopped {
			return
		}
	}
}

// afterStep runs the checks that look at the whole state.
func (s *Sim) afterStep() {
	s.check.after(s)
}

// Run processes events until the nodes are quiet (StopQuiet), nothing is
// left to happen (StopIdle), the next event is past Config.MaxTime
// (StopTime), or a violation stops it (StopViolation). Quiet means: no
// scheduled action or Chaos fault is pending, no election traffic is in
// flight, and the nodes have settled, or are Vacant.
func (s *Sim) Run() Stop {
	limit := int64(-1)
	if s.cfg.MaxTime > 0 {
		limit = s.cfg.MaxTime
	}
	return s.run(limit, true)
}

// RunUntil processes every event up to time t included, then sets the
// clock to t. It does not stop when the nodes are quiet.
func (s *Sim) RunUntil(t int64) Stop {
	if t < s.now {
		t = s.now
	}
	st := s.run(t, false)
	if st == StopTime || st == StopIdle || st == StopQuiet {
		s.advance(t)
	}
	return st
}

func (s *Sim) run(limit int64, untilQuiet bool) Stop {
	for {
		if s.stopped {
			return StopViolation
		}
		if untilQuiet && s.quiet() {
			s.check.finish(s)
			return StopQuiet
		}
		_, at, fromWheel := s.peek()
		if !fromWheel && s.timers.len() == 0 {
			s.check.finish(s)
			return StopIdle
		}
		if limit >= 0 && at > limit {
			return StopTime
		}
		s.Step()
	}
}

func (s *Sim) quiet() bool {
	return s.pending == 0 && s.inFlightElect == 0 && (s.check.settled || s.Vacant())
}

// Vacant reports whether no live node can lead and none believes one does:
// no live node is eligible, none holds a leader, none is electing. It is
// the other way for the nodes to come to rest.
func (s *Sim) Vacant() bool {
	c := &s.check
	return c.liveEligible == 0 && len(c.active) == 0 && c.electing == 0
}

func (s *Sim) pushTimer(at int64, kind evKind, ref int32) {
	s.seq++
	s.timers.push(timer{at: at, seq: s.seq, kind: kind, ref: ref})
}

// kind returns the index of kind k in s.counts, adding it at first sight.
// Messages in flight carry this index instead of the Kind string.
func (s *Sim) kind(k classic.Kind) int {
	for i := range s.counts {
		if s.counts[i].Kind == k {
			return i
		}
	}
	s.counts = append(s.counts, Count{Kind: k})
	return len(s.counts) - 1
}
