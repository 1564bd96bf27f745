package inmem

import (
	"strconv"
	"strings"

	"github.com/electkit/election/classic"
)

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
	Ring = Algorithm{name: "ring", newNode: node(classic.NewRing)}
	// Bully is Garcia-Molina's bully election (classic.NewBully).
	Bully = Algorithm{name: "bully", newNode: node(classic.NewBully)}
)

// LCR and Hirschberg–Sinclair: ring elections with the ring's fault model.
var (
	// LCR is the ring election as van Steen's book tells it
	// (classic.NewLCR): the Election collects the live members, its
	// initiator announces the best. The ring order is the join order.
	LCR = Algorithm{name: "lcr", newNode: node(classic.NewLCR)}
	// HS is Hirschberg and Sinclair's election on a bidirectional ring
	// (classic.NewHS), O(n log n) messages. The ring order is the join
	// order.
	HS = Algorithm{name: "hs", newNode: node(classic.NewHS)}
)

// String returns the algorithm's name: "ring", "bully", "lcr", "hs", "tree"
// or "zab".
func (a Algorithm) String() string {
	if a.name == "" {
		return "none"
	}
	return a.name
}

// The ad hoc tree election (classic.NewTree) on the complete graph of the
// members: every member is in range of every other in one process.
var Tree = Algorithm{name: "tree", newNode: node(func(cfg classic.Config) (*classic.Tree, error) { return classic.NewTree(cfg, nil) })}

// Zab is ZooKeeper's sequence/successor election (classic.NewZab): the
// highest (Priority, earlier Join) leads; each member watches the next
// higher one; a would-be leader needs a majority of ACKs (NEW_LEADER, ACK,
// COMMIT), so under a partition only a side holding a majority of the
// members elects a new leader.
var Zab = Algorithm{name: "zab", newNode: node(classic.NewZab)}

// node turns the constructor of one of package classic's node types into
// one that returns a classic.Node (nil, not a typed nil, on error).
func node[N classic.Node](build func(classic.Config) (N, error)) func(classic.Config) (classic.Node, error) {
	return func(cfg classic.Config) (classic.Node, error) {
		n, err := build(cfg)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}

// Algorithms returns every algorithm a Cluster can run, in the order of
// the package doc: Ring, Bully, LCR, HS, Tree, Zab.
func Algorithms() []Algorithm { return []Algorithm{Ring, Bully, LCR, HS, Tree, Zab} }

// AlgorithmNamed returns the algorithm whose String is name, or an error
// wrapping election.ErrInvalidOption that lists the names.
func AlgorithmNamed(name string) (Algorithm, error) {
	for _, a := range Algorithms() {
		if a.name == name {
			return a, nil
		}
	}
	return Algorithm{}, optErr("inmem.Algorithm", strconv.Quote(name), "must be one of "+algorithmNames())
}

// algorithmNames lists the algorithms' names: "ring, bully, …".
func algorithmNames() string {
	var names []string
	for _, a := range Algorithms() {
		names = append(names, a.name)
	}
	return strings.Join(names, ", ")
}
