package sim

import "github.com/electkit/election/classic"

// The event queue has two parts, both ordered by (time, sequence number):
//
//   - a timing wheel for messages: one FIFO bucket per time slot, as many
//     slots as there are possible delays (MaxDelay+1). Every message in
//     flight arrives within MaxDelay of now, so slots never collide, and
//     FIFO order within a slot is sequence order. Push and pop are O(1) and
//     allocate nothing once the buckets have grown.
//   - a small binary heap for everything else: rounds of ticks, scheduled
//     actions, Chaos faults.

// msgEvent is a message in flight. It holds no pointer (the Kind is
// interned as an index into Sim.counts), so that millions of them cost the
// garbage collector nothing.
type msgEvent struct {
	at       int64
	seq      uint64
	from, to int32 // member indexes
	kind     int32 // index into Sim.counts
	rec      int32 // index into Sim.rec.Messages + 1; 0 when not recording
	w        wire
}

// messageFields spells out classic.Message; the conversion below stops the
// build if a field is added there, so that wire (which carries everything
// but the Kind) cannot silently drop one.
type messageFields struct {
	Kind      classic.Kind
	From, To  classic.ID
	Cand      classic.Rank
	Initiator classic.ID
	Epoch     uint64
	Seq       uint64
	Run       uint64
	List      []classic.Rank
	Phase     uint32
	Hop       uint64
	Left      bool
}

var _ = messageFields(classic.Message{})

// wire is a message in flight without its Kind. LCR's member lists, the
// only pointers a Message holds, wait in Sim.lists; wire keeps their slot
// (0 for none), so that events stay pointer-free.
type wire struct {
	From, To  classic.ID
	Cand      classic.Rank
	Initiator classic.ID
	Epoch     uint64
	Seq       uint64
	Run       uint64
	Hop       uint64
	Phase     uint32
	list      int32 // slot in Sim.lists + 1; 0: List is nil
	Left      bool
}

func (s *Sim) pack(m *classic.Message) wire {
	w := wire{From: m.From, To: m.To, Cand: m.Cand, Initiator: m.Initiator, Epoch: m.Epoch, Seq: m.Seq, Run: m.Run,
		Hop: m.Hop, Phase: m.Phase, Left: m.Left}
	if m.List != nil {
		if k := len(s.freeLists); k > 0 {
			w.list = s.freeLists[k-1]
			s.freeLists = s.freeLists[:k-1]
			s.lists[w.list-1] = m.List
		} else {
			s.lists = append(s.lists, m.List)
			w.list = int32(len(s.lists))
		}
	}
	return w
}

// unpack rebuilds the message and frees its list slot.
func (s *Sim) unpack(w *wire, k classic.Kind) classic.Message {
	m := classic.Message{Kind: k, From: w.From, To: w.To, Cand: w.Cand, Initiator: w.Initiator, Epoch: w.Epoch, Seq: w.Seq, Run: w.Run,
		Hop: w.Hop, Phase: w.Phase, Left: w.Left}
	if w.list != 0 {
		m.List = s.lists[w.list-1]
		s.lists[w.list-1] = nil
		s.freeLists = append(s.freeLists, w.list)
	}
	return m
}

// chunkSize is how many messages one chunk of a slot's FIFO holds.
const chunkSize = 512

// fifo is one slot's queue: a list of chunks (indexes into wheel.pool).
type fifo struct {
	chunks []int32
	first  int // chunks[first] holds the head
	head   int // next to pop in chunks[first]
	tail   int // next free in the last chunk
}

func (f *fifo) empty() bool {
	return f.first == len(f.chunks) || (f.first == len(f.chunks)-1 && f.head == f.tail)
}

type wheel struct {
	slots  []fifo
	pool   [][]msgEvent // chunks, each chunkSize long; never moved
	free   []int32      // chunks not in use
	n      int
	cursor int64 // no message is due before cursor
}

func (w *wheel) init(slots int64) {
	w.slots = make([]fifo, slots)
}

func (w *wheel) slot(t int64) *fifo { return &w.slots[t%int64(len(w.slots))] }

func (w *wheel) chunk() int32 {
	if k := len(w.free); k > 0 {
		c := w.free[k-1]
		w.free = w.free[:k-1]
		return c
	}
	w.pool = append(w.pool, make([]msgEvent, chunkSize))
	return int32(len(w.pool) - 1)
}

func (w *wheel) push(e *msgEvent) {
	if w.n == 0 || e.at < w.cursor {
		w.cursor = e.at
	}
	f := w.slot(e.at)
	if len(f.chunks) == 0 || f.tail == chunkSize {
		f.chunks = append(f.chunks, w.chunk())
		f.tail = 0
	}
	w.pool[f.chunks[len(f.chunks)-1]][f.tail] = *e
	f.tail++
	w.n++
}

// peek returns the earliest message, or nil. The pointer stays valid until
// the message is popped.
func (w *wheel) peek() *msgEvent {
	if w.n == 0 {
		return nil
	}
	for {
		f := w.slot(w.cursor)
		if !f.empty() {
			return &w.pool[f.chunks[f.first]][f.head]
		}
		w.cursor++
	}
}

// pop removes the message peek returned.
func (w *wheel) pop() {
	f := w.slot(w.cursor)
	f.head++
	w.n--
	if f.head == chunkSize && f.first < len(f.chunks)-1 {
		w.free = append(w.free, f.chunks[f.first])
		f.first++
		f.head = 0
	}
	if f.empty() {
		w.free = append(w.free, f.chunks[f.first:]...)
		*f = fifo{chunks: f.chunks[:0]}
	}
}

type evKind uint8

const (
	evTick evKind = iota
	evAction
	evChaos
)

type timer struct {
	at   int64
	seq  uint64
	ref  int32
	kind evKind
}

func (a timer) before(b timer) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

type timerHeap struct{ h []timer }

func (q *timerHeap) len() int    { return len(q.h) }
func (q *timerHeap) top() *timer { return &q.h[0] }

func (q *timerHeap) push(t timer) {
	q.h = append(q.h, t)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.h[i].before(q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *timerHeap) pop() timer {
	t := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h = q.h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		c := l
		if r := l + 1; r < last && q.h[r].before(q.h[l]) {
			c = r
		}
		if !q.h[c].before(q.h[i]) {
			break
		}
		q.h[i], q.h[c] = q.h[c], q.h[i]
		i = c
	}
	return t
}

// idIndex maps IDs to member indexes: a table when the IDs are dense enough
// (a million-node ring numbered 1..N), a map otherwise.
type idIndex struct {
	table []int32 // by ID; -1 where absent
	m     map[classic.ID]int32
}

func newIDIndex(ms []classic.Member) idIndex {
	var hi classic.ID
	for _, m := range ms {
		hi = max(hi, m.ID)
	}
	if hi < classic.ID(4*len(ms)+1024) {
		t := make([]int32, hi+1)
		for i := range t {
			t[i] = -1
		}
		return idIndex{table: t}
	}
	return idIndex{m: make(map[classic.ID]int32, len(ms))}
}

func (x *idIndex) add(id classic.ID, i int32) bool {
	if x.table != nil {
		if x.table[id] >= 0 {
			return false
		}
		x.table[id] = i
		return true
	}
	if _, dup := x.m[id]; dup {
		return false
	}
	x.m[id] = i
	return true
}

func (x *idIndex) get(id classic.ID) (int32, bool) {
	if x.table != nil {
		if id >= classic.ID(len(x.table)) || x.table[id] < 0 {
			return -1, false
		}
		return x.table[id], true
	}
	i, ok := x.m[id]
	return i, ok
}
