package zk

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// Node layout. Under the election path:
//
//	_c_<GUID>-p<16 hex>-<10 digits>   a candidate node: protected ephemeral-sequential, one per candidacy
//	_l                                the leader node: the leader's record naming its candidate node; ephemeral, or persistent after a release's hand-over
//	_c_<GUID>-lead                    the leadership node: created with _l (ephemeral or persistent as it), its creation zxid the token
//	_t                                a pending hand-over (Transfer, preemption): ephemeral, names its target
//	_r                                a transfer request (RequestTransfer): ephemeral, of the requester's session
//	_w-<GUID>                         a candidate's wake-up name: created and deleted in one multi, never seen
//	_q                                the queue node: persistent, empty; every registration bumps its version
//
// The 32 hex digits are a random GUID of the candidacy (a create whose
// reply was lost is found again by it, never made twice); the 16 hex
// digits encode its Priority so that they sort, as text, highest priority
// first (see encodePriority); the 10 digits are the sequence number
// ZooKeeper appended. Candidates are ordered by priority, highest first,
// then by sequence: first come, first served.
//
// A child whose name ends in a 10-digit sequence number and is not a
// candidate node of this layout (a node of an older version of this
// package, "_c_<GUID>-cand-<seq>", or another program's) is a blocker: it
// sorts ahead of every candidate node, by sequence, and never leads; while
// it is ephemeral, no candidate of this layout leads behind it. A
// persistent child never goes away by itself, so it is skipped (and
// logged). Other names are foreign and ignored.

const (
	guidPrefix = "_c_"
	prioInfix  = "-p"
	leadSuffix = "-lead"
	seqDigits  = 10
	prioDigits = 16

	leaderName   = "_l"
	handoverName = "_t"
	queueName    = "_q"
	wakePrefix   = "_w-"
)

func encodeRecord(o election.Options, value []byte) []byte { return record.Encode(o, value) }

// newGUID returns 32 random hex digits.
func newGUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// encodePriority returns 16 hex digits that sort, as text, in descending
// order of p: the complement of p with its sign bit flipped.
func encodePriority(p int64) string {
	return fmt.Sprintf("%016x", ^(uint64(p) ^ 1<<63))
}

// decodePriority is encodePriority's inverse.
func decodePriority(s string) (int64, bool) {
	if len(s) != prioDigits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return 0, false
		}
	}
	k, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, false
	}
	return int64(^k ^ 1<<63), true
}

func isHex(c byte) bool { return hexDigit[c] }

var hexDigit = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()

// nodePrefix is the name a candidate asks ZooKeeper to create, before the
// sequence number.
func nodePrefix(guid string, priority int64) string {
	return guidPrefix + guid + prioInfix + encodePriority(priority) + "-"
}

// leadName is the leadership node of the candidacy with guid.
func leadName(guid string) string { return guidPrefix + guid + leadSuffix }

// wakeName is the wake-up name of the candidacy with guid.
func wakeName(guid string) string { return wakePrefix + guid }

// child is one child of the election path that takes part in the order.
type child struct {
	name    string
	seq     int64
	prio    int64
	blocker bool // not a candidate node of this layout: never leads
}

// sequence returns the sequence number a child's name ends in.
func sequence(name string) (int64, bool) {
	if len(name) < seqDigits {
		return 0, false
	}
	digits := name[len(name)-seqDigits:]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// parseCand parses a candidate node name of this layout.
func parseCand(name string) (guid string, prio, seq int64, ok bool) {
	rest, found := strings.CutPrefix(name, guidPrefix)
	if !found || len(rest) != 32+len(prioInfix)+prioDigits+1+seqDigits {
		return "", 0, 0, false
	}
	g := rest[:32]
	for i := 0; i < len(g); i++ {
		if !isHex(g[i]) {
			return "", 0, 0, false
		}
	}
	rest = rest[32:]
	if !strings.HasPrefix(rest, prioInfix) || rest[len(prioInfix)+prioDigits] != '-' {
		return "", 0, 0, false
	}
	p, ok := decodePriority(rest[len(prioInfix) : len(prioInfix)+prioDigits])
	if !ok {
		return "", 0, 0, false
	}
	s, ok := sequence(name)
	if !ok {
		return "", 0, 0, false
	}
	return g, p, s, true
}

// isLead reports whether name is a leadership node of this layout.
func isLead(name string) bool {
	rest, ok := strings.CutPrefix(name, guidPrefix)
	if !ok || len(rest) != 32+len(leadSuffix) || !strings.HasSuffix(rest, leadSuffix) {
		return false
	}
	for i := 0; i < 32; i++ {
		if !isHex(rest[i]) {
			return false
		}
	}
	return true
}

// view is one listing of the election path, sorted.
type view struct {
	order []child // blockers first (by sequence), then candidates: priority descending, sequence ascending
	marks
}

// marks are the children of a listing that are not in the order.
type marks struct {
	leader   bool     // _l is present
	handover bool     // _t is present
	leads    []string // leadership nodes present
}

// note records n if it is _l, _t or a leadership node, and reports
// whether it was.
func (m *marks) note(n string) bool {
	switch {
	case n == leaderName:
		m.leader = true
	case n == handoverName:
		m.handover = true
	case isLead(n):
		m.leads = append(m.leads, n)
	default:
		return false
	}
	return true
}

// parseView sorts a listing of the election path.
func parseView(names []string) view {
	var v view
	for _, n := range names {
		if v.note(n) {
			continue
		}
		if ch, ok := parseChild(n); ok {
			v.order = append(v.order, ch)
		}
	}
	slices.SortFunc(v.order, compareChildren)
	return v
}

// parseChild parses a child that takes part in the order: a candidate
// node of this layout, or a blocker.
func parseChild(n string) (child, bool) {
	if _, p, s, ok := parseCand(n); ok {
		return child{name: n, seq: s, prio: p}, true
	}
	if s, ok := sequence(n); ok {
		return child{name: n, seq: s, blocker: true}, true
	}
	return child{}, false
}

// place is where one candidate stands in a listing of the election path:
// what a waiter needs, found in one pass without sorting (it lists the
// whole election each time; at N = 10,000 a sort per listing was most of
// a waiter's CPU).
type place struct {
	found   bool
	pred    string // the child just ahead that is not skipped, or ""
	at      int    // how many children are ahead (skipped ones too)
	blocked bool   // a blocker is ahead
	marks
}

// placeIn finds self in a listing; skip names children that never block.
func placeIn(names []string, self child, skip map[string]bool) place {
	var p place
	var pred child
	for _, n := range names {
		switch {
		case n == self.name:
			p.found = true
		case p.note(n):
		default:
			ch, ok := parseChild(n)
			if !ok || compareChildren(ch, self) >= 0 {
				continue
			}
			p.at++
			p.blocked = p.blocked || ch.blocker
			if !skip[n] && (p.pred == "" || compareChildren(ch, pred) > 0) {
				pred, p.pred = ch, n
			}
		}
	}
	return p
}

// compareChildren orders blockers first (by sequence), then candidate
// nodes by priority, highest first, then by sequence.
func compareChildren(a, b child) int {
	switch {
	case a.blocker != b.blocker:
		if a.blocker {
			return -1
		}
		return 1
	case a.prio != b.prio && !a.blocker:
		if a.prio > b.prio {
			return -1
		}
		return 1
	case a.seq != b.seq:
		if a.seq < b.seq {
			return -1
		}
		return 1
	}
	return strings.Compare(a.name, b.name)
}

// guidOf returns the GUID of one of our candidate node names, or "".
func guidOf(name string) string {
	g, _, _, ok := parseCand(name)
	if !ok {
		return ""
	}
	return g
}

// decodeNode checks a node in the order against the layout and returns the
// leader it names (Token = its creation zxid), or why it is malformed.
func decodeNode(name string, data []byte, st *gozk.Stat) (election.Leader, error) {
	if guidOf(name) == "" && name != leaderName {
		return election.Leader{}, errors.New("name is not _c_<32 hex>-p<16 hex>-<10 digits>")
	}
	if st.EphemeralOwner == 0 {
		return election.Leader{}, errors.New("not ephemeral")
	}
	if st.Czxid <= 0 {
		return election.Leader{}, fmt.Errorf("creation zxid %d", st.Czxid)
	}
	l, err := record.Decode(data)
	if err != nil {
		return election.Leader{}, fmt.Errorf("data: %w", err)
	}
	l.Token = uint64(st.Czxid)
	return l, nil
}

// ErrMalformedNode: a child of the election path that takes part in the
// order, or the leader node, is not one of this package (see
// MalformedNodeError).
var ErrMalformedNode = errors.New("zk election: malformed node")

// MalformedNodeError reports a node in the election's order that is not a
// candidate node of this package. It wraps ErrMalformedNode and
// election.ErrNoLeader: such a node never leads.
type MalformedNodeError struct {
	Path           string
	EphemeralOwner int64
	Reason         string
}

func (e *MalformedNodeError) Error() string {
	return fmt.Sprintf("zk election: malformed node %q (ephemeral owner %#x) heads the election: %s; no leader until it is deleted or its session ends",
		e.Path, e.EphemeralOwner, e.Reason)
}

// Unwrap returns ErrMalformedNode and election.ErrNoLeader.
func (e *MalformedNodeError) Unwrap() []error {
	return []error{ErrMalformedNode, election.ErrNoLeader}
}

// handover is the record of a pending hand-over (_t): the candidate node
// of its target.
type handover struct {
	V  int    `json:"v"`
	To string `json:"to"`
}

func encodeHandover(to string) []byte {
	b, _ := json.Marshal(handover{V: 1, To: to}) // cannot fail: plain fields
	return b
}

// decodeHandover returns the target a hand-over record names, or "".
func decodeHandover(data []byte) string {
	var h handover
	if json.Unmarshal(data, &h) != nil || h.V != 1 || guidOf(h.To) == "" {
		return ""
	}
	return h.To
}
