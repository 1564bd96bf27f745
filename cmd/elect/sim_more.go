package main

import (
	"fmt"

	"github.com/electkit/election/classic"
)

// The ad hoc tree, Chubby's quorum lease and ZooKeeper's election in elect sim. The tree runs on
// a 2-column grid graph of the nodes (a ladder: N1-N2 on the first rung),
// so that it is not a complete graph; Chubby elects whoever wins a majority
// first, so its runs tick (candidates wait their turn) and accept any live
// leader.
type moreSim struct {
	title     string
	anyLeader bool
	ticks     bool // always needs ticks
	build     func(p *simPlan, mem *classic.Membership, hb, timeout int) ([]classic.Node, classic.Graph, error)
	formulas  func(p *simPlan, g classic.Graph) simFormulas
}

var moreSims = map[string]moreSim{
	"tree": {
		title: "ad hoc tree election (Vasudevan, Kurose and Towsley) on a 2-column grid",
		build: func(p *simPlan, mem *classic.Membership, hb, timeout int) ([]classic.Node, classic.Graph, error) {
			g, err := classic.GridGraph(allIDs(p.n, func(classic.ID) bool { return true }), 2)
			if err != nil {
				return nil, nil, err
			}
			nodes := make([]classic.Node, p.n)
			for i := range nodes {
				id := classic.ID(i + 1)
				if nodes[i], err = classic.NewTreeFrom(mem, id, g[id], hb, timeout); err != nil {
					return nil, nil, err
				}
			}
			return nodes, g, nil
		},
		formulas: func(p *simPlan, g classic.Graph) simFormulas {
			n, e := int64(p.n), int64(g.Edges())
			f := simFormulas{kinds: map[classic.Kind]expectation{}}
			f.notes = append(f.notes, fmt.Sprintf("tree, one initiator, no failure: 2E-(N-1) TreeElection, as many TreeAck, N-1 TreeLeader: 4E-N+1, here E = %d edges", e))
			if len(p.initiators) == 1 && len(p.crashed) == 0 {
				f.caseName = "one initiator, no failure"
				f.kinds[classic.TreeElection] = expectation{"2E-(N-1)", 2*e - n + 1}
				f.kinds[classic.TreeAck] = expectation{"2E-(N-1)", 2*e - n + 1}
				f.kinds[classic.TreeLeader] = expectation{"N-1", n - 1}
				f.total = &expectation{"4E-N+1", 4*e - n + 1}
			} else {
				f.caseName = "several initiators or crashes: the counts depend on the interleaving and the failure detectors"
			}
			return f
		},
	},
	"chubby": {
		title:     "Chubby quorum-lease election",
		anyLeader: true,
		ticks:     true,
		build: func(p *simPlan, mem *classic.Membership, hb, timeout int) ([]classic.Node, classic.Graph, error) {
			nodes := make([]classic.Node, p.n)
			var err error
			for i := range nodes {
				if nodes[i], err = classic.NewChubbyFrom(mem, classic.ID(i+1), hb, timeout); err != nil {
					return nil, nil, err
				}
			}
			return nodes, nil, nil
		},
		formulas: func(p *simPlan, _ classic.Graph) simFormulas {
			n := int64(p.n)
			f := simFormulas{kinds: map[classic.Kind]expectation{}}
			f.notes = append(f.notes, "chubby: replicas stand when their promise runs out (the best first); --initiators only make them suspect the master early",
				"Heartbeat/Ack here are the master's lease renewals: 2(N-1) per round")
			if len(p.crashed) < (p.n+1)/2 && len(p.crashed) == 0 {
				f.caseName = "no failure: the best replica stands first and wins uncontended"
				f.kinds[classic.VoteRequest] = expectation{"N-1", n - 1}
				f.kinds[classic.Vote] = expectation{"N-1", n - 1}
				f.kinds[classic.Coordinator] = expectation{"N-1", n - 1}
				f.total = &expectation{"3(N-1)", 3 * (n - 1)}
			} else {
				f.caseName = "with crashes: dead replicas get requests but send no votes"
			}
			return f
		},
	},
	"zab": {
		title: "ZooKeeper sequence/successor election (NEW_LEADER, ACK, COMMIT)",
		ticks: true,
		build: func(p *simPlan, mem *classic.Membership, hb, timeout int) ([]classic.Node, classic.Graph, error) {
			nodes := make([]classic.Node, p.n)
			var err error
			for i := range nodes {
				if nodes[i], err = classic.NewZabFrom(mem, classic.ID(i+1), hb, timeout); err != nil {
					return nil, nil, err
				}
			}
			return nodes, nil, nil
		},
		formulas: func(p *simPlan, _ classic.Graph) simFormulas {
			n := int64(p.n)
			f := simFormulas{kinds: map[classic.Kind]expectation{}}
			f.notes = append(f.notes, "zab: the highest server stands alone; each server watches the next-higher one (Heartbeat/Ack, N-1 probes per round, counted apart); --initiators only make them check their successor early")
			if len(p.crashed) == 0 {
				f.caseName = "no failure: the highest server stands alone and wins"
				f.kinds[classic.NewLeader] = expectation{"N-1", n - 1}
				f.kinds[classic.LeaderAck] = expectation{"N-1", n - 1}
				f.kinds[classic.Commit] = expectation{"N-1", n - 1}
				f.total = &expectation{"3(N-1)", 3 * (n - 1)}
			} else {
				f.caseName = "with crashes: the highest live server stands once it finds those above dead; dead servers get NEW_LEADER and COMMIT but send no ACK"
			}
			return f
		},
	},
}
