// Chubby's quorum lease election [Burrows], following the rules of the
// sources: [Gupta] "Election in Google Chubby" and [Notes] "Paxos-like
// solution in Google Chubby".
//
// The rules, as the sources state them:
//
//   - "A potential leader tries to get votes from other servers": a
//     candidate takes a new term (one above the highest it has seen) and
//     sends VoteRequest{Epoch: term} to every replica.
//   - "Each server votes for at most one leader" per term: a replica grants
//     Vote to the first candidate of a term above the last it voted in, and
//     remembers the vote across crashes (stable storage, as Chubby's
//     replicas log it).
//   - "The server with a majority of votes becomes the new leader, informs
//     everyone" (Coordinator). "Since any two quorums intersect, and each
//     server votes at most once, we cannot have two leaders elected
//     simultaneously."
//   - "After the election finishes, other servers promise not to run an
//     election again for a while, the master lease": a replica that votes
//     promises to vote for no one else for the lease (TimeoutTicks) from its
//     vote. "The master lease can be renewed by the master as long as it
//     continues to win a majority each time": every HeartbeatTicks the
//     master asks again in its own term (Heartbeat, the KeepAlive), each
//     replica that voted for it grants again (Ack) and renews its promise;
//     a majority renews the master's lease.
//   - "The lease technique ensures automatic re-election on master
//     failure": a master that fails to renew in time steps down when its
//     lease runs out; replicas whose promise has run out stand.
//
// Why two masters never hold overlapping leases: the master's lease runs
// from the send time of its last round that won a majority, for TimeoutTicks
// − 2 ticks; every replica of that majority voted after that send time and
// promised TimeoutTicks from its vote, and any later master's majority
// contains one of them, which votes again only after its promise. The two
// ticks cover the phase of the nodes' tick counters within one simulated
// tick and the order of events inside it. classic/sim checks it (Leaser).
//
// Message counts (chubby_test.go asserts them): an election without
// contention costs N−1 VoteRequest, N−1 Vote and N−1 Coordinator, 3(N−1);
// each renewal round 2(N−1) Heartbeat/Ack, counted apart as keepalive
// traffic.
//
// What this file adds to the sources, and why:
//
//   - Who stands, and when: a replica without master whose promise has run
//     out stands after HeartbeatTicks·(1 + k), k its place in the rank order
//     counted from the best, so that candidates rarely collide and the
//     best live replica usually wins; a candidate without a majority within
//     TimeoutTicks stands again later. The sources leave this to Paxos. A
//     better replica does not preempt a master that keeps its lease: the
//     lease is the point.
//   - A replica that recovers has lost its promise: it votes for no one for a
//     lease period first, as Chubby's replicas do.
//   - A master that steps down (Start, or turning ineligible) tells everyone
//     with Coordinator{zero Rank}: those that promised it are released at
//     once (it has stopped acting as master), so the next election need not
//     wait for the lease to run out.
//   - Epochs are the terms: one master per term, terms strictly increase.
//     Like every algorithm here without a quorum of stable storage for the
//     master's own state, a master keeps its term's number in memory only;
//     the vote (term and candidate) is the stable state.

package classic

import "math"

// Leaser is implemented by nodes whose leadership is a lease (Chubby): Lease
// reports the term of the master lease this node holds and for how many
// more ticks it runs; 0 ticks when it holds none. Drivers use it to check
// that two leases never overlap.
type Leaser interface {
	Lease() (term uint64, ticks uint64)
}

type chubbyRole uint8

const (
	replica chubbyRole = iota
	candidate
	master
)

// Chubby is one replica of a Chubby cell. Build it with NewChubby or
// NewChubbyFrom. Methods are not safe for concurrent use.
type Chubby struct {
	mem      *Membership
	self     int
	rank     Rank
	stagger  uint64
	hbTicks  uint64
	lease    uint64
	eligible bool

	// Stable: survives Recover.
	maxTerm   uint64
	votedTerm uint64
	votedFor  ID

	now          uint64
	promiseUntil uint64 // no vote for another candidate before then
	promisedTo   ID
	quietUntil   uint64 // after Recover: no vote before then

	hasLeader  bool
	leader     int
	leaderTerm uint64
	heardAt    uint64 // the master's last renewal or announcement

	role      chubbyRole
	term      uint64 // as candidate or master
	round     uint64
	roundSent uint64
	votes     []bool
	count     int
	leaseEnd  uint64
	nextRenew uint64
	standAt   uint64 // a replica without master stands then (0: not scheduled)
}

var (
	_ Node   = (*Chubby)(nil)
	_ Leaser = (*Chubby)(nil)
)

// NewChubby returns the replica cfg.ID. TimeoutTicks is the lease; it must
// exceed HeartbeatTicks + 2 (the master renews well before it runs out).
func NewChubby(cfg Config) (*Chubby, error) {
	m, err := NewMembership(cfg.Members)
	if err != nil {
		return nil, err
	}
	return NewChubbyFrom(m, cfg.ID, cfg.HeartbeatTicks, cfg.TimeoutTicks)
}

// NewChubbyFrom is NewChubby over a shared Membership.
func NewChubbyFrom(m *Membership, id ID, heartbeatTicks, timeoutTicks int) (*Chubby, error) {
	i, err := m.nodeConfig(id, heartbeatTicks, timeoutTicks)
	if err != nil {
		return nil, err
	}
	if timeoutTicks <= heartbeatTicks+2 {
		return nil, errorf("TimeoutTicks %d (the lease) must exceed HeartbeatTicks %d + 2", timeoutTicks, heartbeatTicks)
	}
	m.ranks()
	c := &Chubby{
		mem: m, self: i, rank: m.members[i].Rank(),
		hbTicks: uint64(heartbeatTicks), lease: uint64(timeoutTicks), eligible: true,
		votes: make([]bool, m.Len()),
	}
	c.stagger = uint64(heartbeatTicks) * uint64(m.Len()-int(m.rankPos[i]))
	c.standAt = c.stagger
	return c, nil
}

// ID returns the node's ID.
func (c *Chubby) ID() ID { return c.rank.ID }

// View reports the master this replica knows, in its term.
func (c *Chubby) View() View {
	v := View{Electing: c.role == candidate}
	if c.hasLeader {
		v.Leader, v.Epoch, v.HasLeader = c.mem.members[c.leader].ID, c.leaderTerm, true
	}
	return v
}

// Lease reports the master lease this replica holds.
func (c *Chubby) Lease() (uint64, uint64) {
	if c.role == master && c.now < c.leaseEnd {
		return c.term, c.leaseEnd - c.now
	}
	return 0, 0
}

func (c *Chubby) majority() int { return c.mem.Len()/2 + 1 }

// Start: the replica suspects the master. A master steps down; a replica
// stands as soon as its promise allows.
func (c *Chubby) Start() []Message {
	out := c.stepDown()
	c.hasLeader = false
	c.standAt = max(c.now, 1)
	return append(out, c.maybeStand()...)
}

// Recover restarts the replica: it keeps its vote and highest term, and
// votes for no one for a lease period (it forgot its promise).
func (c *Chubby) Recover() []Message {
	c.role, c.hasLeader = replica, false
	c.promiseUntil, c.promisedTo = 0, 0
	c.quietUntil = satAdd(c.now, c.lease)
	c.standAt = satAdd(c.quietUntil, c.stagger)
	return nil
}

// SetEligible makes the replica stand for master or not.
func (c *Chubby) SetEligible(eligible bool) []Message {
	if eligible == c.eligible {
		return nil
	}
	c.eligible = eligible
	if !eligible {
		out := c.stepDown()
		if c.role == candidate {
			c.role = replica
		}
		return out
	}
	if !c.hasLeader && c.standAt == 0 {
		c.standAt = satAdd(c.now, c.stagger)
	}
	return nil
}

// stepDown ends this replica's mastership and releases the promises made
// to it.
func (c *Chubby) stepDown() []Message {
	if c.role != master {
		return nil
	}
	c.role, c.hasLeader, c.leaseEnd = replica, false, 0
	c.standAt = satAdd(c.now, c.stagger)
	return c.all(Message{Kind: Coordinator, Epoch: c.term})
}

// Tick advances time: renewals, lease expiry, standing.
func (c *Chubby) Tick() []Message {
	c.now++
	switch c.role {
	case master:
		if c.now >= c.leaseEnd {
			c.role, c.hasLeader = replica, false // the lease ran out
			c.standAt = satAdd(c.now, c.stagger)
			return nil
		}
		if c.now >= c.nextRenew {
			c.nextRenew = satAdd(c.now, c.hbTicks)
			return c.newRound(Heartbeat)
		}
		return nil
	case candidate:
		if c.now-c.roundSent >= c.lease {
			c.role = replica // no majority: stand again later
			c.standAt = satAdd(c.now, c.stagger)
		}
		return nil
	}
	if c.hasLeader && c.now >= satAdd(c.heardAt, c.lease) {
		c.hasLeader = false // no renewal for a lease: the master is gone
		c.standAt = satAdd(c.now, c.stagger)
	}
	return c.maybeStand()
}

func (c *Chubby) maybeStand() []Message {
	if c.role != replica || c.hasLeader || !c.eligible || c.standAt == 0 || c.now < c.standAt ||
		c.now < c.promiseUntil || c.now < c.quietUntil || c.maxTerm == math.MaxUint64 {
		return nil
	}
	c.standAt = 0
	c.maxTerm++
	c.term, c.votedTerm, c.votedFor = c.maxTerm, c.maxTerm, c.rank.ID
	c.role = candidate
	out := c.newRound(VoteRequest)
	if c.count >= c.majority() {
		out = append(out, c.win()...)
	}
	return out
}

// newRound asks every replica for its vote in our term (VoteRequest as a
// candidate, Heartbeat as the master renewing).
func (c *Chubby) newRound(k Kind) []Message {
	c.round++
	c.roundSent = c.now
	clear(c.votes)
	c.votes[c.self], c.count = true, 1
	return c.all(Message{Kind: k, Cand: c.rank, Epoch: c.term, Seq: c.round})
}

func (c *Chubby) win() []Message {
	c.role = master
	c.leaseEnd = c.roundSent + c.lease - 2
	c.nextRenew = satAdd(c.now, c.hbTicks)
	c.hasLeader, c.leader, c.leaderTerm, c.heardAt = true, c.self, c.term, c.now
	return c.all(Message{Kind: Coordinator, Cand: c.rank, Epoch: c.term})
}

// Step handles one message addressed to this replica.
func (c *Chubby) Step(m Message) []Message {
	if m.To != c.rank.ID {
		return nil
	}
	from, ok := c.mem.index(m.From)
	if !ok || from == c.self {
		return nil
	}
	switch m.Kind {
	case VoteRequest, Heartbeat:
		if m.Cand != c.mem.members[from].Rank() {
			return nil
		}
		c.maxTerm = max(c.maxTerm, m.Epoch)
		renew := m.Epoch == c.votedTerm && c.votedFor == m.From
		fresh := m.Epoch > c.votedTerm && c.role != master &&
			(c.now >= c.promiseUntil || c.promisedTo == m.From) && c.now >= c.quietUntil
		if !renew && !fresh {
			if m.Kind == Heartbeat && c.role != master && m.Epoch >= c.leaderTerm {
				// A master we did not vote for (we stood or voted in a
				// newer term that came to nothing): it holds a majority,
				// so follow it, without a vote.
				c.role, c.standAt = replica, 0
				c.hasLeader, c.leader, c.leaderTerm, c.heardAt = true, from, m.Epoch, c.now
			}
			return nil
		}
		c.votedTerm, c.votedFor = m.Epoch, m.From
		c.promiseUntil, c.promisedTo = satAdd(c.now, c.lease), m.From
		if c.role == candidate {
			c.role = replica
		}
		c.standAt = 0
		reply := Vote
		if m.Kind == Heartbeat {
			reply = Ack
			c.hasLeader, c.leader, c.leaderTerm, c.heardAt = true, from, m.Epoch, c.now
		} else if c.hasLeader && c.leader != from {
			c.hasLeader = false // we promised another candidate
		}
		if !c.hasLeader {
			c.standAt = satAdd(c.promiseUntil, c.stagger) // if the candidate never wins
		}
		return []Message{c.to(from, Message{Kind: reply, Epoch: m.Epoch, Seq: m.Seq})}
	case Vote, Ack:
		want := candidate
		if m.Kind == Ack {
			want = master
		}
		if c.role != want || m.Epoch != c.term || m.Seq != c.round || c.votes[from] {
			return nil
		}
		c.votes[from] = true
		c.count++
		if c.count < c.majority() {
			return nil
		}
		if c.role == candidate {
			return c.win()
		}
		c.leaseEnd = max(c.leaseEnd, c.roundSent+c.lease-2)
		c.count = -c.mem.Len() // counted once per round
		return nil
	case Coordinator:
		if m.Cand == (Rank{}) {
			// The master steps down: release our promise to it.
			if c.promisedTo == m.From {
				c.promiseUntil = c.now
			}
			if c.hasLeader && c.leader == from {
				c.hasLeader = false
				c.standAt = satAdd(c.now, c.stagger)
			}
			return nil
		}
		if m.Cand != c.mem.members[from].Rank() || m.Epoch < c.leaderTerm || m.Epoch < c.votedTerm {
			return nil
		}
		c.maxTerm = max(c.maxTerm, m.Epoch)
		if c.role != replica {
			return nil // our own bid for a newer term is still out, or we are master
		}
		c.hasLeader, c.leader, c.leaderTerm, c.heardAt = true, from, m.Epoch, c.now
		c.standAt = 0
	}
	return nil
}

func (c *Chubby) all(m Message) []Message {
	out := make([]Message, 0, c.mem.Len()-1)
	for p := range c.mem.members {
		if p != c.self {
			out = append(out, c.to(p, m))
		}
	}
	return out
}

func (c *Chubby) to(p int, m Message) Message {
	m.From, m.To = c.rank.ID, c.mem.members[p].ID
	return m
}
