package zk

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// Node layout. A candidate's node is a protected ephemeral-sequential child
// of the election path,
//
//	/services/scheduler/_c_3f0c…(32 hex)-cand-0000000042  {"v":1,"id":"sched-1","priority":0,"value":"MTAuMC4wLjc6ODA4MA=="}
//
// where the 32 hex digits are a random GUID of this candidacy (so a create
// whose reply was lost is found again by its GUID, never made twice) and
// the 10 digits are the sequence number ZooKeeper appended. Candidates are
// ordered by that sequence; the lowest live one leads.
//
// A child takes part in the order when its name ends in a 10-digit
// sequence number; other children are foreign and ignored. A child in the
// order is well formed when its name is ours (the _c_<GUID>-cand- prefix),
// it is ephemeral, and its data decodes to a version-1 record with a valid
// ID and a Value within election.MaxValueSize. A persistent child never
// goes away by itself, so it is skipped (and logged); an ephemeral child
// that is malformed holds its place and never leads: while it heads the
// order there is no leader, and Leader says which node blocks the election.

const (
	guidPrefix = "_c_"
	candInfix  = "-cand-"
	seqDigits  = 10
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

// nodePrefix is the name a candidate asks ZooKeeper to create, before the
// sequence number.
func nodePrefix(guid string) string { return guidPrefix + guid + candInfix }

// child is one child of the election path that takes part in the order.
type child struct {
	name string
	seq  int64
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

// ordered returns the children that take part in the order, lowest
// sequence first.
func ordered(names []string) []child {
	out := make([]child, 0, len(names))
	for _, n := range names {
		if s, ok := sequence(n); ok {
			out = append(out, child{n, s})
		}
	}
	slices.SortFunc(out, func(a, b child) int {
		if a.seq != b.seq {
			return int(max(-1, min(1, a.seq-b.seq)))
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// guidOf returns the GUID of one of our node names, or "".
func guidOf(name string) string {
	rest, ok := strings.CutPrefix(name, guidPrefix)
	if !ok || len(rest) < 32+len(candInfix)+seqDigits {
		return ""
	}
	g := rest[:32]
	if _, err := hex.DecodeString(g); err != nil || rest[32:len(rest)-seqDigits] != candInfix {
		return ""
	}
	return g
}

// decodeNode checks a node in the order against the layout and returns the
// leader it names (Token = its creation zxid), or why it is malformed.
func decodeNode(name string, data []byte, st *gozk.Stat) (election.Leader, error) {
	if guidOf(name) == "" {
		return election.Leader{}, errors.New("name is not _c_<32 hex>-cand-<10 digits>")
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
// order is not a candidate node of this package (see MalformedNodeError).
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

// MaxPathLen bounds the election path given to New, in bytes.
const MaxPathLen = 1024

// validatePath checks an election path: absolute, no empty, "." or ".."
// segment, no trailing slash, not the root, not under /zookeeper.
func validatePath(path string) error {
	bad := func(reason string) error {
		return &election.OptionError{Field: "path", Value: election.QuoteValue(path), Reason: reason}
	}
	switch {
	case path == "" || path == "/":
		return bad("must name a node below the root, e.g. \"/services/scheduler\"")
	case path[0] != '/':
		return bad("must start with \"/\"")
	case strings.HasSuffix(path, "/"):
		return bad("must not end with \"/\"")
	case len(path) > MaxPathLen:
		return bad(fmt.Sprintf("must be at most %d bytes", MaxPathLen))
	case !utf8.ValidString(path):
		return bad("must be valid UTF-8")
	case path == "/zookeeper" || strings.HasPrefix(path, "/zookeeper/"):
		return bad("must not be under /zookeeper, which the server reserves")
	}
	for _, seg := range strings.Split(path[1:], "/") {
		switch {
		case seg == "":
			return bad("must not contain an empty segment (\"//\")")
		case seg == "." || seg == "..":
			return bad("must not contain \".\" or \"..\" segments")
		}
		for _, r := range seg {
			if r == 0 || (r > 0 && r < 0x20) || r == 0x7f || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
				return bad(fmt.Sprintf("must not contain the character %U", r))
			}
		}
	}
	return nil
}
