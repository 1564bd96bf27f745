package simtest

import (
	"github.com/electkit/election/classic"
)

// Toy nodes: just enough of Chang–Roberts and of the bully to exercise the
// simulator independently of the real algorithms in package classic.

// toyRing is Chang–Roberts with no failure detection.
type toyRing struct {
	self    classic.Member
	succ    classic.ID
	highest uint64
	view    classic.View
	sent    bool // has forwarded or originated an Election in this run
	out     []classic.Message
}

func newToyRing(members []classic.Member, i int) *toyRing {
	return &toyRing{self: members[i], succ: members[(i+1)%len(members)].ID}
}

func (n *toyRing) ID() classic.ID          { return n.self.ID }
func (n *toyRing) View() classic.View      { return n.view }
func (n *toyRing) Tick() []classic.Message { return nil }
func (n *toyRing) SetEligible(bool) []classic.Message {
	return nil
}

func (n *toyRing) emit(m classic.Message) {
	m.From, m.To = n.self.ID, n.succ
	n.out = append(n.out, m)
}

func (n *toyRing) flush() []classic.Message {
	out := n.out
	n.out = nil
	return out
}

func (n *toyRing) Start() []classic.Message {
	n.view.Electing = true
	n.sent = true
	n.emit(classic.Message{Kind: classic.Election, Cand: n.self.Rank(), Initiator: n.self.ID, Epoch: n.highest})
	return n.flush()
}

func (n *toyRing) Recover() []classic.Message {
	n.view = classic.View{Epoch: n.highest}
	n.sent = false
	return n.Start()
}

func (n *toyRing) Step(m classic.Message) []classic.Message {
	n.highest = max(n.highest, m.Epoch)
	switch m.Kind {
	case classic.Election:
		n.view.Electing = true
		switch {
		case m.Cand == n.self.Rank():
			e := n.highest + 1
			n.highest = e
			n.view = classic.View{Leader: n.self.ID, Epoch: e, HasLeader: true}
			n.sent = false
			n.emit(classic.Message{Kind: classic.Elected, Cand: n.self.Rank(), Epoch: e})
		case n.self.Rank().Less(m.Cand):
			n.sent = true
			m.Epoch = n.highest
			n.emit(m)
		case !n.sent:
			n.sent = true
			m.Cand = n.self.Rank()
			m.Epoch = n.highest
			n.emit(m)
		}
	case classic.Elected:
		if m.Cand.ID == n.self.ID {
			break
		}
		n.view = classic.View{Leader: m.Cand.ID, Epoch: m.Epoch, HasLeader: true}
		n.sent = false
		n.emit(m)
	}
	return n.flush()
}

// toyBully is Garcia-Molina's bully with timeouts and a heartbeat to the
// leader; a recovered node holds an election.
type toyBully struct {
	self     classic.Member
	members  []classic.Member
	cfg      classic.Config
	highest  uint64
	view     classic.View
	eligible bool

	waitOK    int // ticks left waiting for an OK; 0: not waiting
	waitCoord int // ticks left waiting for a Coordinator
	hbIn      int // ticks to the next heartbeat
	ackWait   int // ticks left for the leader's Ack
	seq       uint64
	out       []classic.Message
}

func newToyBully(members []classic.Member, i int, hb, timeout int) *toyBully {
	return &toyBully{self: members[i], members: members, eligible: true,
		cfg: classic.Config{ID: members[i].ID, Members: members, HeartbeatTicks: hb, TimeoutTicks: timeout}}
}

func (n *toyBully) ID() classic.ID     { return n.self.ID }
func (n *toyBully) View() classic.View { return n.view }

func (n *toyBully) send(to classic.ID, m classic.Message) {
	m.From, m.To = n.self.ID, to
	n.out = append(n.out, m)
}

func (n *toyBully) flush() []classic.Message {
	out := n.out
	n.out = nil
	return out
}

func (n *toyBully) start() {
	n.view.Electing = true
	n.waitCoord = 0
	higher := false
	for _, m := range n.members {
		if n.self.Rank().Less(m.Rank()) {
			higher = true
			n.send(m.ID, classic.Message{Kind: classic.Election, Cand: n.self.Rank(), Epoch: n.highest})
		}
	}
	if !n.eligible && !higher {
		n.waitCoord = 2 * n.cfg.TimeoutTicks
		return
	}
	if !higher {
		n.win()
		return
	}
	n.waitOK = n.cfg.TimeoutTicks
}

func (n *toyBully) win() {
	if !n.eligible {
		n.waitCoord = 2 * n.cfg.TimeoutTicks
		return
	}
	n.highest++
	n.view = classic.View{Leader: n.self.ID, Epoch: n.highest, HasLeader: true}
	n.waitOK, n.waitCoord = 0, 0
	for _, m := range n.members {
		if m.ID != n.self.ID {
			n.send(m.ID, classic.Message{Kind: classic.Coordinator, Cand: n.self.Rank(), Epoch: n.highest})
		}
	}
}

func (n *toyBully) Start() []classic.Message { n.start(); return n.flush() }

func (n *toyBully) Recover() []classic.Message {
	n.view = classic.View{Epoch: n.highest}
	n.waitOK, n.waitCoord, n.ackWait = 0, 0, 0
	n.start()
	return n.flush()
}

func (n *toyBully) SetEligible(e bool) []classic.Message {
	n.eligible = e
	if !e && n.view.HasLeader && n.view.Leader == n.self.ID {
		n.view.HasLeader = false
		n.start()
	}
	return n.flush()
}

func (n *toyBully) Step(m classic.Message) []classic.Message {
	n.highest = max(n.highest, m.Epoch)
	switch m.Kind {
	case classic.Election:
		n.send(m.From, classic.Message{Kind: classic.OK, Epoch: n.highest})
		if n.waitOK == 0 && !(n.view.HasLeader && n.view.Leader == n.self.ID && !n.view.Electing) {
			n.start()
		} else if n.view.HasLeader && n.view.Leader == n.self.ID {
			n.win()
		}
	case classic.OK:
		if n.waitOK > 0 {
			n.waitOK = 0
			n.waitCoord = 2 * n.cfg.TimeoutTicks
		}
	case classic.Coordinator:
		if m.Epoch >= n.view.Epoch {
			n.view = classic.View{Leader: m.Cand.ID, Epoch: m.Epoch, HasLeader: true}
			n.waitOK, n.waitCoord, n.ackWait = 0, 0, 0
		}
	case classic.Heartbeat:
		n.send(m.From, classic.Message{Kind: classic.Ack, Seq: m.Seq, Epoch: n.highest})
	case classic.Ack:
		if m.Seq == n.seq {
			n.ackWait = 0
		}
	}
	return n.flush()
}

func (n *toyBully) Tick() []classic.Message {
	if n.waitOK > 0 {
		if n.waitOK--; n.waitOK == 0 {
			n.win()
		}
	}
	if n.waitCoord > 0 {
		if n.waitCoord--; n.waitCoord == 0 {
			n.start()
		}
	}
	if n.view.HasLeader && n.view.Leader != n.self.ID && n.cfg.HeartbeatTicks > 0 {
		if n.ackWait > 0 {
			if n.ackWait--; n.ackWait == 0 {
				n.view.HasLeader = false
				n.start()
				return n.flush()
			}
		}
		if n.hbIn--; n.hbIn <= 0 {
			n.hbIn = n.cfg.HeartbeatTicks
			if n.ackWait == 0 {
				n.seq++
				n.ackWait = n.cfg.TimeoutTicks
				n.send(n.view.Leader, classic.Message{Kind: classic.Heartbeat, Seq: n.seq, Epoch: n.highest})
			}
		}
	}
	return n.flush()
}

func toyMembers(ids ...classic.ID) []classic.Member {
	ms := make([]classic.Member, len(ids))
	for i, id := range ids {
		ms[i] = classic.Member{ID: id}
	}
	return ms
}

func toyRings(ms []classic.Member) []classic.Node {
	ns := make([]classic.Node, len(ms))
	for i := range ms {
		ns[i] = newToyRing(ms, i)
	}
	return ns
}

func toyBullies(ms []classic.Member, hb, timeout int) []classic.Node {
	ns := make([]classic.Node, len(ms))
	for i := range ms {
		ns[i] = newToyBully(ms, i, hb, timeout)
	}
	return ns
}
