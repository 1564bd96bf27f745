package zk

import (
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
)

// Policy says what a leader does when its connection to ZooKeeper breaks
// while its session may still be alive (Apache Curator's
// ConnectionStateErrorPolicy).
type Policy int

const (
	// StepDownOnDisconnect ends the Term as soon as the connection is lost
	// (ErrSessionLost), as Curator's standard policy does. The default:
	// the leader stops acting at once, long before the session could
	// expire, and campaigns again (with a new node, so a new token) once
	// reconnected.
	StepDownOnDisconnect Policy = iota
	// HoldUntilDeadline keeps the Term while disconnected, until the point
	// where the server may expire the session: the send time of the last
	// confirmed heartbeat + TTL/(1+ρ) − margin. Reconnecting in time (same
	// session) continues the Term; otherwise it ends then with an error
	// wrapping ErrSessionLost and ErrLeaseExpired. Curator's
	// SessionConnectionStateErrorPolicy.
	HoldUntilDeadline
)

func (p Policy) String() string {
	switch p {
	case StepDownOnDisconnect:
		return "StepDownOnDisconnect"
	case HoldUntilDeadline:
		return "HoldUntilDeadline"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Config holds the ZooKeeper-specific settings of an Elector. The zero
// Config is valid: open ACLs, StepDownOnDisconnect. The TTL is not one of
// them: it is the session timeout the server granted the connection (see
// New).
type Config struct {
	// PathACL is the ACL of the election path (and any missing parent)
	// when this Elector creates it; an existing path keeps its own.
	// Default gozk.WorldACL(gozk.PermAll). Deleting a child needs the
	// Delete permission on the path, so restricting the path's ACL to the
	// candidates' identities (digest) is what stops others from deleting
	// the leader's node.
	PathACL []gozk.ACL
	// NodeACL is the ACL of the candidate nodes. Default
	// gozk.WorldACL(gozk.PermAll). With digest auth on the connection,
	// CreatorOnly(gozk.PermRead) lets only the creator change its node.
	NodeACL []gozk.ACL
	// Policy: what a leader does while disconnected. Default
	// StepDownOnDisconnect.
	Policy Policy
}

// CreatorOnly returns an ACL that gives the node's creator (the
// identities the connection authenticated with) every permission and
// everyone else the permissions in others (e.g. gozk.PermRead). The
// connection must have authenticated (Conn.AddAuth), or creates fail with
// ErrInvalidACL.
func CreatorOnly(others int32) []gozk.ACL {
	acl := gozk.AuthACL(gozk.PermAll)
	if others != 0 {
		acl = append(acl, gozk.WorldACL(others)...)
	}
	return acl
}

// Validate reports the first refused setting as an *election.OptionError
// (wrapping election.ErrInvalidOption) that names it and its value, as
// election.Options.Validate does for the shared options. New, NewConfig
// and Dial call it.
func (c Config) Validate() error {
	if c.Policy != StepDownOnDisconnect && c.Policy != HoldUntilDeadline {
		return &election.OptionError{Field: "Policy", Value: fmt.Sprint(int(c.Policy)), Reason: "must be StepDownOnDisconnect or HoldUntilDeadline"}
	}
	for _, a := range [][]gozk.ACL{c.PathACL, c.NodeACL} {
		for _, e := range a {
			if e.Perms&gozk.PermAll == 0 || e.Scheme == "" {
				return &election.OptionError{Field: "ACL", Value: fmt.Sprintf("%+v", e), Reason: "needs a scheme and at least one permission"}
			}
		}
	}
	return nil
}

// withDefaults returns c with every unset setting at its default.
func (c Config) withDefaults() Config {
	if c.PathACL == nil {
		c.PathACL = gozk.WorldACL(gozk.PermAll)
	}
	if c.NodeACL == nil {
		c.NodeACL = gozk.WorldACL(gozk.PermAll)
	}
	return c
}
