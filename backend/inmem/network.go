package inmem

import (
	"container/heap"
	"sync"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/classic"
	"github.com/electkit/election/internal/clock"
)

// packet is what the in-process network carries between members, named by
// their member numbers. It is either a message of the algorithm (msg, for
// the generation gen) or one of the cluster's own lease messages.
type packet struct {
	from, to int
	gen      uint64
	msg      *classic.Message
	probe    *probe
	ack      *ack
	release  *release
	refused  *refused
}

// probe is a leader asking a peer whether it still accepts it: sent to
// confirm a new leadership and then every HeartbeatTicks to renew it.
type probe struct {
	seq    uint64
	epoch  uint64 // the algorithm's epoch of the leadership
	leader election.Leader
	window time.Duration // how long the leader may act after sending this
}

type verdict uint8

const (
	accept  verdict = iota + 1 // my node names you leader in your epoch
	reject                     // my node names a newer (or another) leader
	notYet                     // my node has not learned of you within TimeoutTicks
	passive                    // I take no part in the algorithm (not built yet)
)

// ack answers a probe.
type ack struct {
	seq     uint64
	epoch   uint64
	verdict verdict
	theirs  uint64 // with reject: the epoch the peer's node names
}

// release tells peers that the leadership of epoch ended (resigned,
// closed, lapsed): they stop showing it at once.
type release struct{ epoch uint64 }

// refused bounces a probe sent to a member that is down: the perfect
// failure detector the algorithms assume ("connection refused", not a
// timeout). A partition drops packets silently instead.
type refused struct{ seq uint64 }

// queue is a runner's inbox: commands run in order as soon as possible,
// packets in order of delivery time. Pushes never block.
type queue struct {
	mu     sync.Mutex
	cmds   []func()
	pkts   pktHeap
	seq    uint64
	closed bool
	wake   chan struct{}
}

func newQueue() *queue { return &queue{wake: make(chan struct{}, 1)} }

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pushCmd queues f; it reports false if the queue is closed.
func (q *queue) pushCmd(f func()) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.cmds = append(q.cmds, f)
	q.signal()
	return true
}

// pushPkt queues p for delivery at at. Packets with equal delivery times
// keep their order, so a link with a fixed latency is FIFO.
func (q *queue) pushPkt(p packet, at time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.seq++
	heap.Push(&q.pkts, timed{p: p, at: at, seq: q.seq})
	q.signal()
	return true
}

// take returns the queued commands and the packets due at now, and the
// delivery time of the next packet (zero if none).
func (q *queue) take(now time.Time) (cmds []func(), pkts []packet, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cmds, q.cmds = q.cmds, nil
	for len(q.pkts) > 0 && !q.pkts[0].at.After(now) {
		pkts = append(pkts, heap.Pop(&q.pkts).(timed).p)
	}
	if len(q.pkts) > 0 {
		next = q.pkts[0].at
	}
	return cmds, pkts, next
}

// close drops everything queued and refuses later pushes.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cmds, q.pkts = nil, nil
}

type timed struct {
	p   packet
	at  time.Time
	seq uint64
}

type pktHeap []timed

func (h pktHeap) Len() int { return len(h) }
func (h pktHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h pktHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pktHeap) Push(x any)   { *h = append(*h, x.(timed)) }
func (h *pktHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// network routes packets between the runners of live members and keeps the
// partition. It has its own lock: runners send all the time.
type network struct {
	latency time.Duration

	mu      sync.RWMutex
	runners map[int]*runner // live members' runners by member number
	group   map[int]int     // partition group by member number; nil when healed
}

func newNetwork(latency time.Duration) *network {
	return &network{latency: latency, runners: map[int]*runner{}}
}

// connectedLocked reports whether a and b are on the same side of the
// partition (members in no group form one group together).
func (n *network) connectedLocked(a, b int) bool {
	return n.group == nil || n.group[a] == n.group[b]
}

func (n *network) connected(a, b int) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.connectedLocked(a, b)
}

// send delivers p to its destination after the latency. A packet across
// the partition is lost; a probe to a member that is down (crashed or gone)
// bounces back as refused after a round trip; anything else to a member
// that is down is lost.
func (n *network) send(p packet) {
	now := clock.Now()
	n.mu.RLock()
	defer n.mu.RUnlock()
	if !n.connectedLocked(p.from, p.to) {
		return
	}
	if r := n.runners[p.to]; r != nil {
		r.q.pushPkt(p, now.Add(n.latency))
		return
	}
	if p.probe != nil {
		if back := n.runners[p.from]; back != nil {
			back.q.pushPkt(packet{from: p.to, to: p.from, refused: &refused{seq: p.probe.seq}}, now.Add(2*n.latency))
		}
	}
}

func (n *network) attach(num int, r *runner) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.runners[num] = r
}

func (n *network) detach(num int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.runners, num)
}

func (n *network) partition(group map[int]int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = group
}
