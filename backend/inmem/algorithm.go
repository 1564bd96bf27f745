package inmem

import "github.com/electkit/election/classic"

// Algorithm is a classic election algorithm a Cluster can run: a name and
// the constructor of its nodes. The values are Ring, Bully, Tree and Zab;
// the zero Algorithm is refused by NewCluster.
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

// String returns the algorithm's name: "ring", "bully", "tree" or "zab".
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
