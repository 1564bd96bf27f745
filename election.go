package election

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them with %w and add context (endpoint, key,
// path); test them with errors.Is. A canceled or expired ctx is returned as
// ctx.Err(), unwrapped.
var (
	// ErrNoLeader is returned by Leader when the election has no leader
	// now.
	ErrNoLeader = errors.New("election: no leader")
	// ErrClosed is returned by every call on a closed Elector, and is the
	// error of a Term that Close ended.
	ErrClosed = errors.New("election: elector closed")
	// ErrNotLeader is returned by an operation that needs a valid Term of
	// this candidate when it has none.
	ErrNotLeader = errors.New("election: not leader")
	// ErrLeaseExpired is the error of a Term whose deadline passed without
	// a newer successful renewal.
	ErrLeaseExpired = errors.New("election: lease expired")
	// ErrSessionLost is the error of a Term, or of Campaign, when the store
	// reported the candidate's lease, session or key gone (another client
	// may have removed it), or the client was closed.
	ErrSessionLost = errors.New("election: session lost")
	// ErrResigned is the error of a Term that ended because its candidate
	// resigned.
	ErrResigned = errors.New("election: resigned")
	// ErrUnhealthy is the error of a Term whose before-renewal hook
	// returned an error or panicked.
	ErrUnhealthy = errors.New("election: unhealthy")
	// ErrPreempted is the error of a Term that another candidate took over
	// (a better priority, or the algorithm elected someone else).
	ErrPreempted = errors.New("election: preempted")
	// ErrTransferred is the error of a Term whose leader handed its
	// leadership to another candidate with Transfer.
	ErrTransferred = errors.New("election: transferred")
	// ErrNoCandidate is wrapped by the error of a Transfer whose target is
	// not a waiting candidate (or, for "the best", when none waits).
	ErrNoCandidate = errors.New("election: no such waiting candidate")
	// ErrTransferFailed is wrapped by the error of a Transfer whose target
	// did not take over within the bound.
	ErrTransferFailed = errors.New("election: transfer not taken over")
	// ErrInvalidOption is wrapped by the error of a refused option or
	// argument, which names the field and the value.
	ErrInvalidOption = errors.New("election: invalid option")
)

// Elector is one candidate in one election. All methods are safe for
// concurrent use.
type Elector interface {
	// Campaign blocks until this candidate leads, ctx ends, or the Elector is
	// closed. On success the returned Term is already valid: the candidate's
	// own key or node was confirmed under its own live lease or session. If
	// ctx ends first, Campaign withdraws the candidacy and returns ctx.Err().
	// If Resign or Close withdraws the candidacy while Campaign waits, it
	// returns an error wrapping ErrResigned or ErrClosed. Campaign while
	// already leading returns the current Term.
	Campaign(ctx context.Context) (*Term, error)
	// Resign ends this candidate's leadership (or withdraws its candidacy) so
	// that the next candidate takes over at once, not after a TTL. The Term,
	// if any, is Done with ErrResigned before Resign returns, and before
	// any request to the store: even when ctx is already done or the store
	// cannot be reached (the key then goes with its lease, and the error
	// says so). Resigning when not a candidate is a no-op that returns nil.
	Resign(ctx context.Context) error
	// Leader reports the current leader, or ErrNoLeader.
	Leader(ctx context.Context) (Leader, error)
	// Observe streams every leader change until ctx ends or Close; the first
	// value is the current state. A zero Leader means "no leader now". A slow
	// reader may miss intermediate values but always gets the newest. The
	// channel is closed when ctx ends or the Elector is closed.
	Observe(ctx context.Context) <-chan Leader
	// Close resigns if leading, withdraws, releases every resource and waits
	// for every goroutine it started. Safe to call twice; later calls of the
	// other methods return ErrClosed.
	Close() error
}

// Leader describes one leadership as the election sees it.
type Leader struct {
	ID       string // the candidate's ID (WithID)
	Value    []byte // application metadata, e.g. the address to forward to (WithValue)
	Priority int64  // the election attribute (WithPriority); higher is better
	Token    uint64 // fencing token of this leadership
}

// IsZero reports whether l is the zero Leader, meaning "no leader now".
func (l Leader) IsZero() bool {
	return l.ID == "" && l.Token == 0 && l.Priority == 0 && len(l.Value) == 0
}

// Equal reports whether l and o describe the same leadership with the same
// metadata.
func (l Leader) Equal(o Leader) bool {
	return l.ID == o.ID && l.Token == o.Token && l.Priority == o.Priority && bytes.Equal(l.Value, o.Value)
}

// String formats l for logs: "id@token", or "none".
func (l Leader) String() string {
	if l.IsZero() {
		return "none"
	}
	return fmt.Sprintf("%s@%d", l.ID, l.Token)
}
