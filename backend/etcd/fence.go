package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
)

// candidacyOf returns the candidacy whose leadership t is, if it is the
// Elector's current one.
func (e *Elector) candidacyOf(t *election.Term) (*candidacy, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: nil Term", election.ErrNotLeader)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, election.ErrClosed
	}
	c := e.cand
	if c == nil || c.lc == nil || c.lc.Term() != t {
		return nil, fmt.Errorf("%w: term %s is not this candidate's current term", election.ErrNotLeader, t)
	}
	return c, nil
}

// Fence returns a comparison that holds exactly while t's leadership key
// exists with t's token as its create revision and no leadership key
// older than it does, that is while etcd counts t's candidate as leader
// (one Compare over the range of leadership keys up to t's): put it in the
// If of a transaction so that the transaction's writes happen only while
// t is current — the etcd-native way to fence writes, stronger than
// checking the token before writing.
//
//	cmp, err := e.Fence(t)
//	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut("/jobs/next", "42")).Commit()
//	// resp.Succeeded is false once another candidate leads.
//
// It fails with an error wrapping election.ErrNotLeader if t is not this
// Elector's current, valid Term.
func (e *Elector) Fence(t *election.Term) (clientv3.Cmp, error) {
	c, err := e.candidacyOf(t)
	if err != nil {
		return clientv3.Cmp{}, err
	}
	if err := t.Err(); err != nil {
		return clientv3.Cmp{}, fmt.Errorf("%w: %s ended: %w", election.ErrNotLeader, t, err)
	}
	// Over the leadership keys up to c's own: c's alone, at its token.
	return clientv3.Compare(clientv3.CreateRevision(e.lay.leader()), "=", int64(t.Token())).WithRange(after(e.lkeyOf(c))), nil
}

// FenceKey returns t's leadership key, the last key of the range Fence
// compares: it exists while t leads (and, reserved, a little before),
// its create revision is the token and its value names the leader;
// deleting it ends t. It fails with an error wrapping
// election.ErrNotLeader if t is not this Elector's current, valid Term.
func (e *Elector) FenceKey(t *election.Term) (string, error) {
	c, err := e.candidacyOf(t)
	if err != nil {
		return "", err
	}
	if err := t.Err(); err != nil {
		return "", fmt.Errorf("%w: %s ended: %w", election.ErrNotLeader, t, err)
	}
	return e.lkeyOf(c), nil
}

// Proclaim publishes value as the leader's Value without a new election:
// observers see the change. It succeeds only while t is valid and t's
// leadership key is there (the write is guarded by its create revision
// and lease), and
// fails with election.ErrNotLeader otherwise. The Term's own Leader keeps
// the value it was elected with. value is bounded like WithValue.
func (e *Elector) Proclaim(ctx context.Context, t *election.Term, value []byte) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	if len(value) > election.MaxValueSize {
		return &election.OptionError{Field: "Proclaim value", Value: fmt.Sprintf("%d bytes", len(value)), Reason: fmt.Sprintf("must be at most %d bytes", election.MaxValueSize)}
	}
	c, err := e.candidacyOf(t)
	if err != nil {
		return err
	}
	if err := t.Err(); err != nil {
		return fmt.Errorf("%w: %w", election.ErrNotLeader, err)
	}
	tok, lkey := int64(t.Token()), e.lkeyOf(c)
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(lkey), "=", tok),
			clientv3.Compare(clientv3.LeaseValue(lkey), "=", c.s.lease)).
		Then(clientv3.OpPut(lkey, string(record.EncodeLeader(*e.o, value, c.key)), clientv3.WithLease(c.s.lease))).
		Commit()
	if err != nil {
		return e.storeErr(ctx, "proclaiming on "+lkey, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: leader key %s (token %d) is gone", election.ErrNotLeader, lkey, tok)
	}
	return nil
}
