package election

import (
	"context"
	"errors"
	"fmt"
)

// Candidate is a candidate waiting in an election (see Candidates).
type Candidate struct {
	ID       string // the candidate's ID (WithID)
	Value    []byte // its metadata (WithValue)
	Priority int64  // its priority (WithPriority)
}

// The optional interfaces of an Elector that Candidates, Transfer and
// RequestTransfer use; package backend exports them for backend authors
// (Lister, Transferer, TransferRequester).
type (
	lister interface {
		Candidates(ctx context.Context) ([]Candidate, error)
	}
	transferer interface {
		Transfer(ctx context.Context, t *Term, to string, fallback Fallback) error
	}
	transferRequester interface {
		RequestTransfer(ctx context.Context, to string) (Leader, error)
	}
)

// Fallback says what a Transfer whose target is not a waiting candidate
// does with the leadership.
type Fallback int

const (
	// KeepLeading: the Transfer fails before anything changes, and the Term
	// stays valid.
	KeepLeading Fallback = iota
	// StepDown: the Term ends anyway, as with Resign (ErrResigned), and
	// the next leader comes from the normal order.
	StepDown
)

// String names f as in the package's documentation.
func (f Fallback) String() string {
	switch f {
	case KeepLeading:
		return "KeepLeading"
	case StepDown:
		return "StepDown"
	}
	return fmt.Sprintf("Fallback(%d)", int(f))
}

// Transfer hands t, a valid Term of e, to the waiting candidate whose ID is
// to, or to the best waiting one (the one that would lead next) when to is
// "", without waiting for a TTL: the leadership moves on purpose, say
// before the leader's node is drained.
//
// If to is not waiting (or none waits), Transfer returns an error wrapping
// ErrNoCandidate that names it; with KeepLeading nothing has changed and t
// is still valid, with StepDown t has been resigned. Otherwise t ends with
// an error wrapping ErrTransferred before the hand-over is sent (the
// candidate leaves the election, as after Resign: campaign again to queue
// anew), and the target leads next, with a higher token, ahead of every
// other candidate. Transfer returns nil once the target leads (on etcd,
// once the hand-over's transaction, which makes the target leader, has
// committed). If it has not within a bound — one lease window of t's on
// the other store backends; see each backend's doc — or before ctx ends,
// the hand-over lapses — it is withdrawn, or goes with the target's lease
// — and the next leader comes from the normal order: Transfer returns an
// error wrapping ErrTransferFailed (or ctx's error). A leadership handed on is not taken
// back: the old Term is over before the target can lead (P3). On the
// store backends (etcd, ZooKeeper) its renewal hooks and its Events
// (Events.Ended) have also returned before the hand-over is sent, unless
// they take longer than 100 ms (backend.HandOverWait). Do not call
// Transfer from a renewal hook.
//
// An Elector that cannot transfer returns an error wrapping
// errors.ErrUnsupported, with t untouched. A t that is not e's valid Term
// gives ErrNotLeader.
func Transfer(ctx context.Context, e Elector, t *Term, to string, fallback Fallback) error {
	if err := checkArgs(ctx, e); err != nil {
		return err
	}
	if fallback != KeepLeading && fallback != StepDown {
		return &OptionError{Field: "Fallback", Value: fallback.String(), Reason: "must be KeepLeading or StepDown"}
	}
	if to != "" {
		if err := validateID(to); err != nil {
			var oe *OptionError
			if errors.As(err, &oe) {
				oe.Field = "Transfer target"
			}
			return err
		}
	}
	if t == nil {
		return fmt.Errorf("%w: no Term to transfer", ErrNotLeader)
	}
	tr, ok := e.(transferer)
	if !ok {
		return fmt.Errorf("election: %T cannot transfer its leadership: %w", e, errors.ErrUnsupported)
	}
	return tr.Transfer(ctx, t, to, fallback)
}

// Candidates lists the candidates waiting in e's election, in the order
// they would lead: the highest Priority first, ties first come, first
// served. The leader is not among them. It costs a read of the whole queue
// (one request on the store backends): it is for operators and tests, not
// for a hot path. An Elector that cannot list its candidates returns an
// error wrapping errors.ErrUnsupported.
func Candidates(ctx context.Context, e Elector) ([]Candidate, error) {
	if err := checkArgs(ctx, e); err != nil {
		return nil, err
	}
	l, ok := e.(lister)
	if !ok {
		return nil, fmt.Errorf("election: %T cannot list its candidates: %w", e, errors.ErrUnsupported)
	}
	return l.Candidates(ctx)
}

// RequestTransfer asks the current leader of e's election to transfer its
// leadership to the waiting candidate whose ID is to (the best waiting one
// when to is ""), through the store: e need not campaign, and the leader
// may run in another process. The leader's Elector honours the request as
// Transfer with KeepLeading does. RequestTransfer returns the new leader
// once it leads; an error wrapping ErrNoLeader when nobody leads; one
// wrapping ErrNoCandidate when the leader found no such waiting candidate
// (it keeps leading); one wrapping ErrTransferFailed when the leadership
// did not move to the target within two lease windows (say, the leader
// runs a version without transfers, or the target did not take over); or
// ctx's error. An Elector that cannot returns an error wrapping
// errors.ErrUnsupported.
func RequestTransfer(ctx context.Context, e Elector, to string) (Leader, error) {
	if err := checkArgs(ctx, e); err != nil {
		return Leader{}, err
	}
	if to != "" {
		if err := validateID(to); err != nil {
			var oe *OptionError
			if errors.As(err, &oe) {
				oe.Field = "Transfer target"
			}
			return Leader{}, err
		}
	}
	r, ok := e.(transferRequester)
	if !ok {
		return Leader{}, fmt.Errorf("election: %T cannot request a transfer: %w", e, errors.ErrUnsupported)
	}
	return r.RequestTransfer(ctx, to)
}
