package classic

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The driver (testNet) and the counting convention are in ring_test.go.

func lcrNet(t testing.TB, members []Member, hb, to int) *testNet {
	t.Helper()
	m, err := NewMembership(members)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]Node, len(members))
	for i, mb := range members {
		l, err := NewLCRFrom(m, mb.ID, hb, to)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = l
	}
	return newNet(t, nodes)
}

func listString(l []Rank) string {
	s := make([]string, len(l))
	for i, r := range l {
		s[i] = r.String()
	}
	return strings.Join(s, " ")
}

// TestLCRVanSteenExample is figure 6.21 of van Steen's book (the slides'
// "LCR: the algorithm illustrated"): eight processes P0..P7 in a ring, the
// coordinator P7 has crashed, P6 and P3 both notice and initiate. Here P_i
// is N(i+1) (ID 0 is reserved), so N8 is down and N7 and N4 initiate.
func TestLCRVanSteenExample(t *testing.T) {
	n := lcrNet(t, ms(1, 2, 3, 4, 5, 6, 7, 8), 2, 5)
	n.crash(8)
	for range 10 { // N7 skips its dead successor
		n.tick()
	}
	if l := n.nodes[7].(*LCR); l.det.peer(+1) != 0 {
		t.Fatalf("N7 should skip N8: successor at %d", l.det.peer(+1))
	}
	n.logging = true
	n.start(7, 4)
	n.deliver()
	wantAgreed(t, n, 7, 1)
	// N7's Election visits the 7 live nodes and its Coordinator too: 2N
	// with N = 7. N4's run meets N7's at N7, which drops it (lower run):
	// 3 Elections more.
	if n.count[Election] != 7+3 || n.count[Coordinator] != 7 {
		t.Fatalf("counts %v, want 10 Election (7 + N4's 3) and 7 Coordinator", n.count)
	}
	var coord *Message
	for i, m := range n.log {
		if m.Kind == Coordinator {
			coord = &n.log[i]
			break
		}
	}
	if coord == nil || coord.From != 7 || listString(coord.List) != "N7 N1 N2 N3 N4 N5 N6" {
		t.Fatalf("first Coordinator %v, want N7's carrying the live members N7 N1 … N6", coord)
	}
	for _, id := range []ID{1, 4, 6} {
		if got := listString(n.nodes[id].(*LCR).Live()); got != "N7 N1 N2 N3 N4 N5 N6" {
			t.Fatalf("N%d's member list: %s", id, got)
		}
	}
}

// TestLCRAlways2N: one initiator, no failure: N Election and N Coordinator
// messages, wherever the initiator stands (the slides: best case = worst
// case = 2N).
func TestLCRAlways2N(t *testing.T) {
	for _, size := range []int{1, 2, 3, 4, 5, 8, 13, 64, 257} {
		members, best := shuffledRing(size, uint64(size))
		for init := range size {
			if size > 64 && init%17 != 0 {
				continue
			}
			n := lcrNet(t, members, 2, 5)
			n.start(members[init].ID)
			n.deliver()
			if n.count[Election] != size || n.count[Coordinator] != size || n.elections() != 2*size {
				t.Fatalf("N=%d initiator at %d: %v, want N Election + N Coordinator = %d", size, init, n.count, 2*size)
			}
			wantAgreed(t, n, members[best].ID, 1)
		}
	}
}

func TestLCRMultipleInitiators(t *testing.T) {
	for seed := range uint64(40) {
		size := 3 + int(seed%9)
		members, best := shuffledRing(size, seed+100)
		n := lcrNet(t, members, 2, 5)
		var inits []ID
		for i, mb := range members {
			if (seed>>uint(i%6))&1 == 1 || i == 0 {
				inits = append(inits, mb.ID)
			}
		}
		n.start(inits...)
		n.deliver()
		wantAgreed(t, n, members[best].ID, 1)
		// Each node passes on at most one Election per run, and only the
		// highest run reaches its initiator.
		if n.count[Coordinator] != size || n.count[Election] > size*len(inits) {
			t.Fatalf("seed %d, initiators %v: %v", seed, inits, n.count)
		}
	}
}

func TestLCRLeaderCrashAndRecovery(t *testing.T) {
	n := lcrNet(t, ms(lecture...), 2, 5)
	n.start(3)
	n.settle(0, 10)
	wantAgreed(t, n, 80, 1)
	n.crash(80)
	n.settle(50, 20) // N5 finds its successor, the leader, dead
	wantAgreed(t, n, 32, 2)
	if got := listString(n.nodes[5].(*LCR).Live()); strings.Contains(got, "N80") {
		t.Fatalf("N80 is dead but listed: %s", got)
	}
	n.recover(80) // holds an election
	n.deliver()
	wantAgreed(t, n, 80, 3)
	n.settle(0, 20)
	n.crash(5, 80)
	n.settle(100, 20)
	wantAgreed(t, n, 32, 4)
	n.recover(80)
	if l, _ := n.settle(200, 20); l != 80 {
		t.Fatalf("after recovery behind a dead predecessor: N%d", l)
	}
}

func TestLCRIneligible(t *testing.T) {
	n := lcrNet(t, ms(lecture...), 2, 5)
	n.setEligible(80, false)
	n.start(80)
	n.deliver()
	wantAgreed(t, n, 32, 1)
	for _, id := range lecture {
		n.setEligible(id, false)
	}
	n.settleNone(200)
	n.setEligible(6, true)
	if l, _ := n.settle(200, 20); l != 6 {
		t.Fatalf("only N6 stands, N%d leads", l)
	}
}

func TestLCRChaos(t *testing.T) {
	for seed := range uint64(12) {
		chaos(t, func(m []Member) *testNet { return lcrNet(t, m, 2, 5) }, seed, 3+int(seed%6), 60)
	}
	for seed := range uint64(20) {
		size := 3 + int(seed%6)
		chaos(t, func(m []Member) *testNet { return unreliable(lcrNet(t, m, 2, 5), seed, 0) }, seed+200, size, 40)
		chaosQuiet(t, func(m []Member) *testNet { return unreliable(lcrNet(t, m, 2, 5), seed, 3) }, seed+300, size, 40, 0)
	}
}

func TestLCRGarbage(t *testing.T) {
	members := ms(lecture...)
	survives(t, lcrNet(t, members, 2, 5), members)
	l, _ := NewLCR(Config{ID: 5, Members: members, HeartbeatTicks: 2, TimeoutTicks: 5})
	for _, m := range []Message{
		{Kind: Election, From: 32, To: 5, Initiator: 3, List: []Rank{{ID: 3}, {ID: 3}}},           // listed twice
		{Kind: Election, From: 32, To: 5, Initiator: 3, List: []Rank{{ID: 99}}},                   // not a member
		{Kind: Coordinator, From: 32, To: 5, Initiator: 3, Cand: Rank{ID: 80, Attr: 1}, Epoch: 1}, // wrong attribute
		{Kind: Reply, From: 32, To: 5},
	} {
		if out := l.Step(m); len(out) != 0 || l.View() != (View{}) {
			t.Errorf("%v: sent %v, view %+v", m, out, l.View())
		}
	}
	if _, err := NewLCR(Config{ID: 9, Members: members, HeartbeatTicks: 2, TimeoutTicks: 5}); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "own ID 9") {
		t.Errorf("bad ID: %v", err)
	}
}

// TestLCRListOrder: the Coordinator lists every live member once, in ring
// order from the initiator.
func TestLCRListOrder(t *testing.T) {
	members := ms(10, 20, 30, 40, 50)
	n := lcrNet(t, members, 2, 5)
	n.logging = true
	n.start(30)
	n.deliver()
	var want []string
	for i := range members {
		want = append(want, fmt.Sprintf("N%d", members[(2+i)%5].ID))
	}
	for _, m := range n.log {
		if m.Kind == Coordinator && listString(m.List) != strings.Join(want, " ") {
			t.Fatalf("%v", m)
		}
	}
	if !slices.ContainsFunc(n.log, func(m Message) bool { return m.Kind == Coordinator }) {
		t.Fatal("no Coordinator")
	}
}
