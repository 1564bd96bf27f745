package classic

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

func hsNet(t testing.TB, members []Member, hb, to int) *testNet {
	t.Helper()
	m, err := NewMembership(members)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]Node, len(members))
	for i, mb := range members {
		h, err := NewHSFrom(m, mb.ID, hb, to)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = h
	}
	return newNet(t, nodes)
}

// hsBound is the seeds' bound on HS's messages: 8n(1 + ⌈log₂ n⌉).
func hsBound(n int) int {
	return 8 * n * (1 + ceilLog2(n))
}

func ceilLog2(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// hsOrder returns n members in one of the ID orders the bound test uses:
// ascending, descending, bit-reversed (each phase's winners sit far apart),
// and seeded random shuffles.
func hsOrder(n, order int) []Member {
	ids := make([]ID, n)
	for i := range ids {
		ids[i] = ID(i + 1)
	}
	switch order {
	case 0:
	case 1:
		slices.Reverse(ids)
	case 2:
		w := bits.Len(uint(n))
		slices.SortFunc(ids, func(a, b ID) int {
			return int(bits.Reverse64(uint64(a)<<(64-w))>>(64-w)) - int(bits.Reverse64(uint64(b)<<(64-w))>>(64-w))
		})
	default:
		rng := rand.New(rand.NewPCG(uint64(n), uint64(order)))
		rng.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	return ms(ids...)
}

// hsRun runs one failure-free HS election over members, FIFO, with the
// given initiators (positions), and returns the election messages sent and
// the leader every node names.
func hsRun(t testing.TB, members []Member, initiators []int) (msgs int, leader ID) {
	m, err := NewMembership(members)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]*HS, len(members))
	for i, mb := range members {
		if nodes[i], err = NewHSFrom(m, mb.ID, 2, 5); err != nil {
			t.Fatal(err)
		}
	}
	var q fifo
	for _, i := range initiators {
		q.push(nodes[i].Start())
	}
	for msg, ok := q.pop(); ok; msg, ok = q.pop() {
		msgs++
		i, _ := m.index(msg.To)
		q.push(nodes[i].Step(msg))
	}
	for i, nd := range nodes {
		v := nd.View()
		if !v.HasLeader || v.Electing || v.Epoch != 1 || (i > 0 && v.Leader != leader) {
			t.Fatalf("n=%d: node %d: %+v, node 0 names N%d", len(members), i, v, leader)
		}
		leader = v.Leader
	}
	return msgs, leader
}

// TestHSMessageBound: every n from 1 to 512, and 24 sizes more up to 4,096
// (1,023, 1,024, 1,025, 2,047, 2,048, 2,049, 4,095, 4,096 and sizes drawn
// with a fixed seed), in several ID orders: up to n = 128 five (ascending,
// descending, bit-reversed, two random shuffles), up to 512 three
// (descending, bit-reversed, random), above two (bit-reversed, random); each
// order started two ways (every node at once, the seeds' setting, and one
// node whose tokens wake the others). The messages never exceed
// 8n(1 + ⌈log₂ n⌉), and the best node leads. With -short: n up to 128.
func TestHSMessageBound(t *testing.T) {
	sizes := []int{}
	top := 512
	if testing.Short() {
		top = 128
	}
	for n := 1; n <= top; n++ {
		sizes = append(sizes, n)
	}
	if !testing.Short() {
		rng := rand.New(rand.NewPCG(4096, 1))
		for _, p := range []int{1024, 2048, 4096} {
			sizes = append(sizes, p-1, p, p+1)
		}
		for len(sizes) < top+24 {
			sizes = append(sizes, 513+rng.IntN(4096-512))
		}
		slices.Sort(sizes)
		sizes = slices.Compact(sizes)
		sizes = slices.DeleteFunc(sizes, func(n int) bool { return n > 4096 })
	}
	worst := 0.0
	for _, n := range sizes {
		orders := []int{0, 1, 2, 3, 4}
		switch {
		case n > 512:
			orders = []int{2, 3}
		case n > 128:
			orders = []int{1, 2, 3}
		}
		for _, order := range orders {
			members := hsOrder(n, order)
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			for _, inits := range [][]int{all, {(n * 7 / 11) % n}} {
				msgs, leader := hsRun(t, members, inits)
				if leader != ID(n) {
					t.Fatalf("n=%d order %d: N%d leads, want N%d", n, order, leader, n)
				}
				if msgs > hsBound(n) {
					t.Fatalf("n=%d order %d, %d initiators: %d messages > 8n(1+⌈log₂ n⌉) = %d", n, order, len(inits), msgs, hsBound(n))
				}
				worst = max(worst, float64(msgs)/float64(hsBound(n)))
			}
		}
	}
	t.Logf("%d sizes up to %d: at most %.0f%% of the bound", len(sizes), sizes[len(sizes)-1], 100*worst)
}

// TestHSPhases: in a ring of 8 in ascending order, every node stands in
// phase 0; N8's token comes home in phase 3 (2^3 = 8 hops) and it leads.
func TestHSPhases(t *testing.T) {
	n := hsNet(t, ms(1, 2, 3, 4, 5, 6, 7, 8), 2, 5)
	n.logging = true
	n.start(1, 2, 3, 4, 5, 6, 7, 8)
	n.deliver()
	wantAgreed(t, n, 8, 1)
	maxPhase := map[ID]uint32{}
	for _, m := range n.log {
		if m.Kind == Election {
			maxPhase[m.Cand.ID] = max(maxPhase[m.Cand.ID], m.Phase)
		}
	}
	// Ascending order: N1..N7 each lose phase 0 to the neighbour above
	// (except N7, whose right neighbour N8 swallows it too); N8 goes on to
	// phase 3.
	for id := ID(1); id <= 7; id++ {
		if maxPhase[id] != 0 {
			t.Errorf("N%d reached phase %d, want 0", id, maxPhase[id])
		}
	}
	if maxPhase[8] != 3 {
		t.Errorf("N8 reached phase %d, want 3", maxPhase[8])
	}
	if n.count[Elected] != 8 || n.elections() > hsBound(8) {
		t.Errorf("counts %v", n.count)
	}
}

func TestHSLeaderCrashAndRecovery(t *testing.T) {
	n := hsNet(t, ms(lecture...), 2, 5)
	n.start(3)
	n.settle(0, 10)
	wantAgreed(t, n, 80, 1)
	n.crash(80)
	n.settle(50, 20)
	wantAgreed(t, n, 32, 2)
	n.recover(80)
	n.deliver()
	wantAgreed(t, n, 80, 3)
	n.settle(0, 20)
	n.crash(5, 80)
	n.settle(100, 20)
	wantAgreed(t, n, 32, 4)
	n.recover(80)
	if l, _ := n.settle(200, 20); l != 80 {
		t.Fatalf("after recovery behind a dead neighbour: N%d", l)
	}
}

func TestHSIneligible(t *testing.T) {
	n := hsNet(t, ms(lecture...), 2, 5)
	n.setEligible(80, false)
	n.setEligible(32, false)
	n.start(80) // an ineligible node opens the run: a wake-up goes round
	n.deliver()
	wantAgreed(t, n, 12, 1)
	for _, id := range lecture {
		n.setEligible(id, false)
	}
	n.settleNone(200)
	n.start(5) // no one stands: the wake-up comes home, the run closes
	n.settleNone(200)
	n.setEligible(6, true)
	if l, _ := n.settle(200, 20); l != 6 {
		t.Fatalf("only N6 stands, N%d leads", l)
	}
}

func TestHSChaos(t *testing.T) {
	for seed := range uint64(12) {
		chaos(t, func(m []Member) *testNet { return hsNet(t, m, 2, 5) }, seed, 3+int(seed%6), 60)
	}
	for seed := range uint64(20) {
		size := 3 + int(seed%6)
		chaos(t, func(m []Member) *testNet { return unreliable(hsNet(t, m, 2, 5), seed, 0) }, seed+200, size, 40)
		chaosQuiet(t, func(m []Member) *testNet { return unreliable(hsNet(t, m, 2, 5), seed, 3) }, seed+300, size, 40, 0)
	}
}

func TestHSGarbage(t *testing.T) {
	members := ms(lecture...)
	survives(t, hsNet(t, members, 2, 5), members)
	h, _ := NewHS(Config{ID: 5, Members: members, HeartbeatTicks: 2, TimeoutTicks: 5})
	for _, m := range []Message{
		{Kind: Reply, From: 32, To: 5, Run: 1},                                  // no candidate
		{Kind: Election, From: 32, To: 5, Run: 1, Hop: 1, Cand: Rank{ID: 81}},   // not a member
		{Kind: Election, From: 32, To: 5, Run: 1, Hop: 0, Initiator: 99},        // wake-up from no member
		{Kind: Coordinator, From: 32, To: 5, Cand: Rank{ID: 80}, Epoch: 1},      // not HS's
		{Kind: Elected, From: 32, To: 5, Cand: Rank{ID: 80}, Initiator: 80},     // epoch 0
		{Kind: Election, From: 32, To: 6, Run: 1, Hop: 1, Cand: Rank{ID: 80}},   // not for us
		{Kind: Election, From: 77, To: 5, Run: 1, Hop: 1, Cand: Rank{ID: 80}},   // unknown sender
		{Kind: Elected, From: 32, To: 5, Cand: Rank{ID: 80, Attr: 3}, Epoch: 1}, // wrong attribute
	} {
		if out := h.Step(m); len(out) != 0 || h.View() != (View{}) {
			t.Errorf("%v: sent %v, view %+v", m, out, h.View())
		}
	}
}
