package backend

import (
	"context"

	"github.com/electkit/election"
)

// Lister is the optional interface of an Elector that can list the
// candidates waiting in its election, for election.Candidates: in the
// order they would lead, the highest Priority first, ties first come, first
// served, without the leader.
type Lister interface {
	Candidates(ctx context.Context) ([]election.Candidate, error)
}

// Transferer is the optional interface of an Elector that can hand its
// leadership to a waiting candidate, for election.Transfer, which checks
// the arguments (a valid target ID or "", a known Fallback, a non-nil
// Term) before it calls Transfer. Transfer keeps the contract that
// election.Transfer documents.
type Transferer interface {
	Transfer(ctx context.Context, t *election.Term, to string, fallback election.Fallback) error
}

// TransferRequester is the optional interface of an Elector that can ask
// the election's current leader, in whatever process it runs, to transfer
// its leadership, for election.RequestTransfer, which checks the target ID
// before it calls RequestTransfer.
type TransferRequester interface {
	RequestTransfer(ctx context.Context, to string) (election.Leader, error)
}
