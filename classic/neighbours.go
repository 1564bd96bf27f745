package classic

// The ring failure detector shared by LCR (one side: the successor) and
// Hirschberg–Sinclair (two sides: successor and predecessor). It is the
// ring's detector (ring.go) generalised to both directions:
//
//   - every HeartbeatTicks a node sends Heartbeat to its live neighbour on
//     each side; a neighbour that has not answered the oldest unanswered
//     Heartbeat within TimeoutTicks is taken for dead and skipped: the next
//     member that way becomes the neighbour;
//   - any message from a neighbour shows it alive; a message from a skipped
//     node takes it back as neighbour;
//   - each heartbeat period a node also probes one skipped node per side,
//     round robin, so a recovered node is found behind a run of dead ones;
//   - a recovering node announces itself with a Heartbeat to its nearest
//     members on each side (up to announceTo).

// side is the detector's state for one direction.
type side struct {
	dir      int   // +1: successors (clockwise); -1: predecessors
	peer     int32 // the live neighbour this way
	cursor   int32 // the skipped node to probe next
	probing  bool  // a Heartbeat to peer is unanswered
	probeSeq uint64
	probeAt  uint64
}

// detector watches a node's neighbours on one or two sides.
type detector struct {
	mem     *Membership
	self    int32
	now     uint64
	seq     uint64
	hb, to  uint64
	nextHB  uint64
	sides   []side
	epochOf func() uint64 // the epoch Heartbeats and Acks carry
}

func (d *detector) init(m *Membership, self int, hb, to int, dirs ...int) {
	d.mem, d.self = m, int32(self)
	d.hb, d.to = uint64(hb), uint64(to)
	d.sides = make([]side, len(dirs))
	for i, dir := range dirs {
		d.sides[i].dir = dir
	}
	d.reset()
}

func (d *detector) reset() {
	for i := range d.sides {
		s := &d.sides[i]
		s.peer = int32(d.step(int(d.self), s.dir))
		s.cursor = s.peer
		s.probing = false
	}
	d.nextHB = satAdd(d.now, d.hb)
}

// step moves one member from i in direction dir.
func (d *detector) step(i, dir int) int {
	n := d.mem.Len()
	return ((i+dir)%n + n) % n
}

// dist is the number of hops from this node to j in direction dir.
func (d *detector) dist(j, dir int) int {
	n := d.mem.Len()
	x := (j - int(d.self)) * dir
	return (x%n + n) % n
}

// gap is the number of hops to side s's neighbour; N when alone.
func (d *detector) gap(s *side) int {
	if g := d.dist(int(s.peer), s.dir); g != 0 {
		return g
	}
	return d.mem.Len()
}

// skipped reports whether j lies between this node and side s's neighbour.
func (d *detector) skipped(s *side, j int) bool {
	return j != int(d.self) && d.dist(j, s.dir) < d.gap(s)
}

// dead reports whether this node takes member j for dead.
func (d *detector) dead(j int) bool {
	for i := range d.sides {
		if d.skipped(&d.sides[i], j) {
			return true
		}
	}
	return false
}

func (d *detector) msg(pos int32, m Message) Message {
	m.From, m.To = d.mem.members[d.self].ID, d.mem.members[pos].ID
	return m
}

// tick advances time: heartbeats and probes. It returns the messages to
// send and whether some neighbour was just skipped.
func (d *detector) tick() (out []Message, lost bool) {
	d.now++
	for i := range d.sides {
		s := &d.sides[i]
		if s.peer != d.self && s.probing && d.now-s.probeAt >= d.to {
			s.peer = int32(d.step(int(s.peer), s.dir))
			s.probing = false
			s.cursor = int32(d.step(int(d.self), s.dir))
			lost = true
		}
	}
	if d.now < d.nextHB {
		return nil, lost
	}
	d.nextHB = satAdd(d.now, d.hb)
	for i := range d.sides {
		s := &d.sides[i]
		if s.peer != d.self {
			d.seq++
			out = append(out, d.msg(s.peer, Message{Kind: Heartbeat, Seq: d.seq, Epoch: d.epochOf()}))
			if !s.probing {
				s.probing, s.probeSeq, s.probeAt = true, d.seq, d.now
			}
		}
		if d.gap(s) > 1 {
			if !d.skipped(s, int(s.cursor)) {
				s.cursor = int32(d.step(int(d.self), s.dir))
			}
			d.seq++
			out = append(out, d.msg(s.cursor, Message{Kind: Heartbeat, Seq: d.seq, Epoch: d.epochOf()}))
			s.cursor = int32(d.step(int(s.cursor), s.dir))
		}
	}
	return out, lost
}

// heard notes a message from member j: a neighbour is alive, a skipped node
// is taken back. It reports whether a node was taken back.
func (d *detector) heard(j int) (tookBack bool) {
	for i := range d.sides {
		s := &d.sides[i]
		if int32(j) == s.peer {
			s.probing = false
		} else if d.skipped(s, j) {
			s.peer, s.probing = int32(j), false
			s.cursor = int32(d.step(int(d.self), s.dir))
			tookBack = true
		}
	}
	return tookBack
}

// acked notes an Ack from member j.
func (d *detector) acked(j int, seq uint64) {
	for i := range d.sides {
		if s := &d.sides[i]; s.probing && int32(j) == s.peer && seq >= s.probeSeq {
			s.probing = false
		}
	}
}

// announce returns the Heartbeats a recovering node sends to its nearest
// members on each side.
func (d *detector) announce() []Message {
	var out []Message
	d.seq++
	seen := map[int]bool{}
	for i := range d.sides {
		dir := -d.sides[i].dir // those that would skip us look our way
		for p, k := d.step(int(d.self), dir), 0; p != int(d.self) && k < announceTo; p, k = d.step(p, dir), k+1 {
			if !seen[p] {
				seen[p] = true
				out = append(out, d.msg(int32(p), Message{Kind: Heartbeat, Seq: d.seq, Epoch: d.epochOf()}))
			}
		}
	}
	return out
}

// peer returns the live neighbour in direction dir (+1 or -1).
func (d *detector) peer(dir int) int32 {
	for i := range d.sides {
		if d.sides[i].dir == dir {
			return d.sides[i].peer
		}
	}
	return d.self
}
