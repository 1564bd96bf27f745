package classic

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The driver (testNet) and the counting convention are in ring_test.go:
// only Election, OK and Coordinator count here; Heartbeat and Ack, which the
// failure detector and the epoch query send, are counted apart.

func bullyNet(t testing.TB, members []Member, hb, to int) *testNet {
	t.Helper()
	m, err := NewMembership(members)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]Node, len(members))
	for i, mb := range members {
		b, err := NewBullyFrom(m, mb.ID, hb, to)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = b
	}
	return newNet(t, nodes)
}

// upTo returns members 1..n; the rank is the ID.
func upTo(n int) []Member {
	out := make([]Member, n)
	for i := range out {
		out[i] = Member{ID: ID(i + 1)}
	}
	return out
}

const hb, to = 2, 5

// TestBullyLectureRun is lecture 08's run: N80 has failed and N6 detects it;
// N32 is elected. Then N32 fails too, and N12 is elected; then N12, and N6.
func TestBullyLectureRun(t *testing.T) {
	n := bullyNet(t, ms(lecture...), hb, to)
	n.logging = true
	n.crash(80)
	n.start(6)
	n.deliver()
	want := []string{
		"Election N6→N12 cand=N6",
		"Election N6→N32 cand=N6",
		"Election N6→N80 cand=N6",
		"OK N12→N6",
		"Election N12→N32 cand=N12",
		"Election N12→N80 cand=N12",
		"OK N32→N6",
		"Election N32→N80 cand=N32",
		"OK N32→N12",
	}
	if got := n.transcript(); !slices.Equal(got, want) {
		t.Fatalf("transcript:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	n.log = nil
	// N32 hears no OK from N80 within the timeout and announces itself.
	for range to - 1 {
		n.tick()
	}
	if v := n.nodes[32].View(); v.HasLeader {
		t.Fatalf("N32 led before its timeout: %+v", v)
	}
	n.tick()
	want = []string{
		"Coordinator N32→N3 leader=N32 epoch=1",
		"Coordinator N32→N5 leader=N32 epoch=1",
		"Coordinator N32→N6 leader=N32 epoch=1",
		"Coordinator N32→N12 leader=N32 epoch=1",
	}
	if got := n.transcript(); !slices.Equal(got, want) {
		t.Fatalf("transcript:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantAgreed(t, n, 32, 1)
	if n.count[Election] != 6 || n.count[OK] != 3 || n.count[Coordinator] != 4 {
		t.Fatalf("counts %v, want 6 Election, 3 OK, 4 Coordinator", n.count)
	}

	n.crash(32)
	if l, e := n.settle(100, 20); l != 12 || e != 2 {
		t.Fatalf("after N32 fails: N%d epoch %d, want N12 epoch 2", l, e)
	}
	n.crash(12)
	if l, e := n.settle(100, 20); l != 6 || e != 3 {
		t.Fatalf("after N12 fails: N%d epoch %d, want N6 epoch 3", l, e)
	}
}

// TestBullyLectureMidElection: N32 fails after answering OK, before it
// announces. N6 and N12, waiting for a Coordinator, time out and elect again:
// N12 wins.
func TestBullyLectureMidElection(t *testing.T) {
	n := bullyNet(t, ms(lecture...), hb, to)
	n.crash(80)
	n.start(6)
	n.deliver()
	n.crash(32)
	before := n.count[Election]
	for range 3*to - 1 {
		n.tick()
	}
	if n.count[Election] != before {
		t.Fatalf("elected again before the Coordinator wait (3·TimeoutTicks) ran out: %v", n.count)
	}
	if l, e := n.settle(100, 20); l != 12 || e != 1 {
		t.Fatalf("N%d epoch %d, want N12 epoch 1", l, e)
	}
}

// TestBullyBestCase: the second-best detects that the best died (its failure
// detector fires first: the test ticks only it, so no other node's detector
// fires). It knows it is the highest alive: N−2 Coordinator messages, no
// Election, no OK.
func TestBullyBestCase(t *testing.T) {
	for _, size := range []int{3, 4, 5, 10, 50, 200} {
		n := bullyNet(t, upTo(size), hb, to)
		n.start(ID(size))
		n.deliver()
		wantAgreed(t, n, ID(size), 1)
		n.resetCounts()

		n.crash(ID(size))
		second := n.nodes[ID(size-1)]
		for i := 0; !second.View().HasLeader || second.View().Leader != ID(size-1); i++ {
			if i > hb+to {
				t.Fatalf("N=%d: the second-best did not take over: %+v", size, second.View())
			}
			n.send(second.ID(), second.Tick())
			n.deliver()
		}
		if n.count[Coordinator] != size-2 || n.count[Election] != 0 || n.count[OK] != 0 {
			t.Fatalf("N=%d: %v, want %d Coordinator and no Election or OK", size, n.count, size-2)
		}
		if n.count[Ack] != 0 {
			t.Fatalf("N=%d: a confirmed node asked for epochs: %v", size, n.count)
		}
		wantAgreed(t, n, ID(size-1), 2)
		n.settle(0, 20)
	}
}

// TestBullyWorstCase: a fresh cluster (no leader yet), all alive, and the
// lowest node initiates; FIFO delivery. Every node but the top sends Election
// to every node above it: (N−1)+(N−2)+…+1 = N(N−1)/2. Every Election reaches
// a node that is not yet leader (the top is still asking for epochs when the
// later ones arrive), so each is answered OK: N(N−1)/2. The top announces
// once: N−1 Coordinator. Total N(N−1) + N−1 = N²−1.
func TestBullyWorstCase(t *testing.T) {
	for _, size := range []int{2, 3, 4, 5, 8, 16, 50, 120} {
		n := bullyNet(t, upTo(size), hb, to)
		n.start(1)
		n.deliver()
		half := size * (size - 1) / 2
		if n.count[Election] != half || n.count[OK] != half || n.count[Coordinator] != size-1 {
			t.Fatalf("N=%d: %v, want %d Election, %d OK, %d Coordinator", size, n.count, half, half, size-1)
		}
		if n.elections() != size*size-1 {
			t.Fatalf("N=%d: %d messages, want N²−1 = %d", size, n.elections(), size*size-1)
		}
		wantAgreed(t, n, ID(size), 1)
		n.settle(0, 20)
	}
}

// TestBullyWorstCaseTopFailed is the notebook's worst case: the leader (the
// top) has failed and the lowest node detects it. The lowest sends N−1
// Election (one to the dead top), and so on up: N(N−1)/2 Election; the N−1
// sent to the dead top go unanswered: (N−1)(N−2)/2 OK. The second-best times
// out waiting for the top's OK and announces: N−2 Coordinator.
func TestBullyWorstCaseTopFailed(t *testing.T) {
	for _, size := range []int{3, 4, 5, 8, 16, 50} {
		n := bullyNet(t, upTo(size), hb, to)
		n.start(ID(size))
		n.deliver()
		n.resetCounts()
		n.crash(ID(size))
		n.start(1)
		l, e := n.settle(100, 0)
		half := size * (size - 1) / 2
		if n.count[Election] != half || n.count[OK] != (size-1)*(size-2)/2 || n.count[Coordinator] != size-2 {
			t.Fatalf("N=%d: %v, want %d Election, %d OK, %d Coordinator", size, n.count, half, (size-1)*(size-2)/2, size-2)
		}
		if l != ID(size-1) || e != 2 {
			t.Fatalf("N=%d: N%d epoch %d", size, l, e)
		}
		n.settle(0, 20)
	}
}

// TestBullyLarge is the worst case on a larger cluster, N = 1000 (300 with
// -short); BenchmarkBullyWorstCase2000 runs the simulator's N = 2000.
func TestBullyLarge(t *testing.T) { bullyLarge(t, 1000, 300) }

func BenchmarkBullyWorstCase2000(b *testing.B) {
	for range b.N {
		bullyLarge(b, 2000, 2000)
	}
}

func bullyLarge(t testing.TB, size, short int) {
	if testing.Short() {
		size = short
	}
	m, err := NewMembership(upTo(size))
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]*Bully, size)
	for i := range nodes {
		if nodes[i], err = NewBullyFrom(m, ID(i+1), hb, to); err != nil {
			t.Fatal(err)
		}
	}
	var q fifo
	q.push(nodes[0].Start())
	var counts [4]int
	for msg, ok := q.pop(); ok; msg, ok = q.pop() {
		switch msg.Kind {
		case Election:
			counts[0]++
		case OK:
			counts[1]++
		case Coordinator:
			counts[2]++
		}
		q.push(nodes[msg.To-1].Step(msg))
	}
	half := size * (size - 1) / 2
	if counts[0] != half || counts[1] != half || counts[2] != size-1 {
		t.Fatalf("counts %v", counts)
	}
	if v := nodes[0].View(); v.Leader != ID(size) || v.Epoch != 1 {
		t.Fatalf("%+v", v)
	}
}

// TestBullyRecoveredTopNode: the seeds let a recovered top node announce at
// once, but it may have missed leaderships while it was down. It asks the
// lower members for their epochs first (Heartbeat/Ack, not counted) and then
// sends the seeds' N−1 Coordinator, with an epoch above every earlier one.
func TestBullyRecoveredTopNode(t *testing.T) {
	const size = 6
	n := bullyNet(t, upTo(size), hb, to)
	n.start(1)
	n.deliver()
	wantAgreed(t, n, 6, 1)
	n.crash(6)
	if l, e := n.settle(100, 20); l != 5 || e != 2 {
		t.Fatalf("N%d epoch %d, want N5 epoch 2", l, e)
	}
	n.resetCounts()
	n.recover(6)
	n.deliver()
	wantAgreed(t, n, 6, 3) // not 2: that was N5's
	if n.count[Coordinator] != size-1 || n.count[Election] != 0 || n.count[OK] != 0 {
		t.Fatalf("%v, want %d Coordinator and no Election or OK", n.count, size-1)
	}
	if n.count[Heartbeat] != size-1 || n.count[Ack] != size-1 {
		t.Fatalf("the epoch query: %v", n.count)
	}
	n.settle(0, 20)

	// A recovered lower node holds an election; the leader answers its
	// Election with a Coordinator and keeps its epoch.
	n.crash(2)
	n.settle(0, 20)
	n.recover(2)
	if l, e := n.settle(100, 20); l != 6 || e != 3 {
		t.Fatalf("after N2 recovers: N%d epoch %d, want N6 epoch 3", l, e)
	}
}

// TestBullyWouldBeLeaderDiesDuringEpochQuery: the top of a fresh cluster
// starts, asks the others for their epochs, and dies before it announces.
// Nobody else was electing; the query itself tells them an announcement is
// due, and when none comes they elect.
func TestBullyWouldBeLeaderDiesDuringEpochQuery(t *testing.T) {
	n := bullyNet(t, upTo(4), hb, to)
	n.start(4)
	n.crash(4)
	n.deliver()
	for _, id := range []ID{1, 2, 3} {
		if v := n.nodes[id].View(); !v.Electing {
			t.Fatalf("N%d does not expect a Coordinator: %+v", id, v)
		}
	}
	if l, e := n.settle(100, 20); l != 3 || e != 1 {
		t.Fatalf("N%d epoch %d, want N3 epoch 1", l, e)
	}
}

// TestBullyStaleCoordinator: a Coordinator whose epoch the receiver knows to
// be stale is not adopted; the receiver elects again with its higher epoch.
func TestBullyStaleCoordinator(t *testing.T) {
	t.Run("unit", func(t *testing.T) {
		b, err := NewBully(Config{ID: 1, Members: upTo(3), HeartbeatTicks: 1, TimeoutTicks: 3})
		if err != nil {
			t.Fatal(err)
		}
		b.Step(Message{Kind: Coordinator, From: 2, To: 1, Cand: Rank{ID: 2}, Epoch: 5})
		if v := b.View(); v.Leader != 2 || v.Epoch != 5 {
			t.Fatalf("%+v", v)
		}
		out := b.Step(Message{Kind: Coordinator, From: 3, To: 1, Cand: Rank{ID: 3}, Epoch: 4})
		if v := b.View(); v.Leader != 2 || v.Epoch != 5 || len(out) != 2 || out[0].Kind != Election || out[0].Epoch != 5 {
			t.Fatalf("stale epoch 4 after 5: view %+v, sent %v", v, out)
		}
		// Epoch 5 again, from another leader: 5 is used up, so the Election
		// shows 6 and the claimant learns its leadership is stale.
		b.Tick()
		b.Step(Message{Kind: Coordinator, From: 2, To: 1, Cand: Rank{ID: 2}, Epoch: 5}) // idle again
		out = b.Step(Message{Kind: Coordinator, From: 3, To: 1, Cand: Rank{ID: 3}, Epoch: 5})
		if v := b.View(); v.Leader != 2 || len(out) != 2 || out[1].To != 3 || out[1].Epoch != 6 {
			t.Fatalf("conflicting epoch 5: view %+v, sent %v", v, out)
		}
		b.Step(Message{Kind: Coordinator, From: 3, To: 1, Cand: Rank{ID: 3}, Epoch: 7})
		if v := b.View(); v.Leader != 3 || v.Epoch != 7 || v.Electing {
			t.Fatalf("fresh epoch 7: %+v", v)
		}
	})
	t.Run("recovered top loses its epoch query", func(t *testing.T) {
		n := bullyNet(t, upTo(5), hb, to)
		n.start(5)
		n.deliver()
		n.crash(5)
		n.settle(100, 20) // N4, epoch 2
		n.check = false   // N5 is about to reuse epoch 2: that is the point
		n.logging = true
		adopted := map[View][]ID{}
		n.onView = func(id ID, v View) {
			v.Electing = false
			if !slices.Contains(adopted[v], id) {
				adopted[v] = append(adopted[v], id)
			}
		}
		n.drop = func(m Message) bool { return m.Kind == Heartbeat && (m.From == 5 || m.To == 5) }
		n.recover(5)
		for range to {
			n.tick()
		}
		stale := Message{Kind: Coordinator, From: 5, Cand: Rank{ID: 5}, Epoch: 2}
		if i := slices.IndexFunc(n.log, func(m Message) bool { m.To = 0; return reflect.DeepEqual(m, stale) }); i < 0 {
			t.Fatalf("expected N5 to announce the stale epoch 2: %v", n.transcript())
		}
		n.drop = nil
		l, e := n.settle(200, 20)
		if l != 5 || e <= 2 {
			t.Fatalf("settled on N%d epoch %d; want N5 above epoch 2", l, e)
		}
		if got := adopted[View{Leader: 5, Epoch: 2, HasLeader: true}]; !slices.Equal(got, []ID{5}) {
			t.Fatalf("the stale (N5, epoch 2) was adopted by %v; only N5 itself may hold it", got)
		}
	})
}

func TestBullyIneligible(t *testing.T) {
	t.Run("never stands nor answers", func(t *testing.T) {
		n := bullyNet(t, ms(lecture...), hb, to)
		n.setEligible(80, false)
		n.start(3)
		if l, e := n.settle(100, 20); l != 32 || e != 1 {
			t.Fatalf("N%d epoch %d", l, e)
		}
		if n.count[OK] != 4+3+2+1 { // N80 answers no one
			t.Fatalf("%v", n.count)
		}
	})
	t.Run("ineligible initiator asks everyone", func(t *testing.T) {
		n := bullyNet(t, ms(lecture...), hb, to)
		for _, id := range []ID{80, 32, 12} {
			n.setEligible(id, false)
		}
		n.start(32)
		if l, e := n.settle(100, 20); l != 6 || e != 1 {
			t.Fatalf("N%d epoch %d, want N6", l, e)
		}
	})
	t.Run("nobody eligible", func(t *testing.T) {
		n := bullyNet(t, ms(lecture...), hb, to)
		for _, id := range lecture {
			n.setEligible(id, false)
		}
		n.start(5)
		for range 10 * to {
			n.tick()
		}
		before := n.elections()
		for range 10 * to {
			n.tick()
		}
		if n.elections() != before || before != 5 {
			t.Fatalf("%d election messages, then %d more", before, n.elections()-before)
		}
		for _, id := range lecture {
			if v := n.nodes[id].View(); v.HasLeader || v.Electing {
				t.Fatalf("N%d: %+v", id, v)
			}
		}
	})
	t.Run("leader turns ineligible then eligible", func(t *testing.T) {
		n := bullyNet(t, ms(lecture...), hb, to)
		n.start(80)
		n.deliver()
		wantAgreed(t, n, 80, 1)
		n.setEligible(80, false)
		if v := n.nodes[80].View(); v.HasLeader || !v.Electing {
			t.Fatalf("an ineligible leader must step down and elect at once: %+v", v)
		}
		if l, e := n.settle(100, 20); l != 32 || e != 2 {
			t.Fatalf("N%d epoch %d", l, e)
		}
		n.setEligible(80, true)
		if l, e := n.settle(100, 20); l != 80 || e != 3 {
			t.Fatalf("N%d epoch %d", l, e)
		}
	})
}

func TestBullyMultipleInitiators(t *testing.T) {
	for size := 2; size <= 12; size++ {
		members, best := shuffledRing(size, uint64(size)+500)
		n := bullyNet(t, members, hb, to)
		for _, mb := range members {
			n.start(mb.ID)
		}
		n.deliver()
		if l, e := n.settle(100, 20); l != members[best].ID || e != 1 {
			t.Fatalf("N=%d: N%d epoch %d, want N%d epoch 1", size, l, e, members[best].ID)
		}
	}
}

func TestBullyEpochsIncreaseUnderCrashes(t *testing.T) {
	for seed := range uint64(12) {
		chaos(t, func(m []Member) *testNet { return bullyNet(t, m, hb, to) }, seed+50, 3+int(seed%6), 60)
	}
}

func TestBullyReorderedAndLossy(t *testing.T) {
	for seed := range uint64(30) {
		size := 3 + int(seed%6)
		chaos(t, func(m []Member) *testNet { return unreliable(bullyNet(t, m, hb, to), seed, 0) }, seed+200, size, 60)
		chaosQuiet(t, func(m []Member) *testNet { return unreliable(bullyNet(t, m, hb, to), seed, 3) }, seed+300, size, 60, 0)
	}
}

func TestBullyGarbage(t *testing.T) {
	members := ms(lecture...)
	n := bullyNet(t, members, hb, to)
	survives(t, n, members)

	b, _ := NewBully(Config{ID: 5, Members: members, HeartbeatTicks: 2, TimeoutTicks: 5})
	for _, m := range []Message{
		{Kind: "Bogus", From: 32, To: 5},
		{Kind: Election, From: 77, To: 5},                                  // unknown sender
		{Kind: Election, From: 3, To: 6},                                   // not for us
		{Kind: Election, From: 5, To: 5},                                   // from itself
		{Kind: Coordinator, From: 32, To: 5, Cand: Rank{ID: 80}, Epoch: 1}, // sender is not the candidate
		{Kind: Coordinator, From: 32, To: 5, Cand: Rank{ID: 32, Attr: 1}, Epoch: 1},
		{Kind: Coordinator, From: 32, To: 5, Cand: Rank{ID: 32}}, // epoch 0
		{Kind: OK, From: 32, To: 5},                              // no election running
		{Kind: Ack, From: 32, To: 5, Seq: 1},
		{Kind: Elected, From: 32, To: 5, Cand: Rank{ID: 32}, Epoch: 1},
	} {
		if out := b.Step(m); len(out) != 0 || b.View() != (View{}) {
			t.Errorf("%v: sent %v, view %+v", m, out, b.View())
		}
	}
}
