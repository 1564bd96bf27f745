package inmem

import "github.com/electkit/election/classic"

// Algorithm is a classic election algorithm a Cluster can run: a name and
// the constructor of its nodes. The values are Ring, Bully, LCR, HS, Tree
// and Zab; the zero Algorithm is refused by NewCluster. Chubby's quorum
// lease (classic.NewChubby) is not one of them: see the package doc.
type Algorithm struct {
	name    string
	newNode func(classic.Config) (classic.Node, error)
}

// The algorithms of package classic that a Cluster can run.
var (
	// Ring is Chang and Roberts' ring election (classic.NewRing). The ring
	// order is the order in which members joined.
	Ring = Algorithm{name: "ring", newNode: newRing}
	// Bully is Garcia-Molina's bully election (classic.NewBully).
	Bully = Algorithm{name: "bully", newNode: newBully}
)

// LCR and Hirschberg–Sinclair: ring elections with the ring's fault model.
var (
	// LCR is the ring election as van Steen's book tells it
	// (classic.NewLCR): the Election collects the live members, its
	// initiator announces the best. The ring order is the join order.
	LCR = Algorithm{name: "lcr", newNode: newLCR}
	// HS is Hirschberg and Sinclair's election on a bidirectional ring
	// (classic.NewHS), O(n log n) messages. The ring order is the join
	// order.
	HS = Algorithm{name: "hs", newNode: newHS}
)

func newLCR(cfg classic.Config) (classic.Node, error) {
	n, err := classic.NewLCR(cfg)
	if err != nil {
		return nil, err
	}
	return n, nil
}

func newHS(cfg classic.Config) (classic.Node, error) {
	n, err := classic.NewHS(cfg)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// String returns the algorithm's name: "ring", "bully", "lcr", "hs", "tree"
// or "zab".
func (a Algorithm) String() string {
	if a.name == "" {
		return "none"
	}
	return a.name
}

func newRing(cfg classic.Config) (classic.Node, error) {
	n, err := classic.NewRing(cfg)
	if err != nil {
		return nil, err
	}
	return n, nil
}

func newBully(cfg classic.Config) (classic.Node, error) {
	n, err := classic.NewBully(cfg)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// The ad hoc tree election (classic.NewTree) on the complete graph of the
// members: every member is in range of every other in one process.
var Tree = Algorithm{name: "tree", newNode: func(cfg classic.Config) (classic.Node, error) {
	n, err := classic.NewTree(cfg, nil)
	if err != nil {
		return nil, err
	}
	return n, nil
}}

// Zab is ZooKeeper's sequence/successor election (classic.NewZab): the
// highest (Priority, earlier Join) leads; each member watches the next
// higher one; a would-be leader needs a majority of ACKs (NEW_LEADER, ACK,
// COMMIT), so under a partition only a side holding a majority of the
// members elects a new leader.
var Zab = Algorithm{name: "zab", newNode: func(cfg classic.Config) (classic.Node, error) {
	n, err := classic.NewZab(cfg)
	if err != nil {
		return nil, err
	}
	return n, nil
}}
