package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
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

// LeaderCmp returns a comparison that holds exactly while t's key exists
// with t's create revision, that is while etcd counts t's candidate as
// leader: put it in the If of a transaction so that the transaction's
// writes happen only while t is current — the etcd-native way to fence
// writes, stronger than checking the token before writing.
//
//	cmp, err := e.LeaderCmp(t)
//	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut("/jobs/next", "42")).Commit()
//	// resp.Succeeded is false once another candidate leads.
//
// It fails with election.ErrNotLeader if t is not this Elector's current
// Term.
func (e *Elector) LeaderCmp(t *election.Term) (clientv3.Cmp, error) {
	c, err := e.candidacyOf(t)
	if err != nil {
		return clientv3.Cmp{}, err
	}
	return clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev), nil
}

// Proclaim publishes value as the leader's Value without a new election:
// observers see the change. It succeeds only while t is valid and its key
// is current (the write is guarded by the key's create revision), and
// fails with election.ErrNotLeader otherwise. The Term's own Leader keeps
// the value it was elected with. value is bounded like WithValue.
func (e *Elector) Proclaim(ctx context.Context, t *election.Term, value []byte) error {
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
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev),
			clientv3.Compare(clientv3.LeaseValue(c.key), "=", c.lease)).
		Then(clientv3.OpPut(c.key, encodeRecord(e.o, value), clientv3.WithLease(c.lease))).
		Commit()
	if err != nil {
		return e.storeErr(ctx, "proclaiming on "+c.key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: key %s (revision %d) is gone", election.ErrNotLeader, c.key, c.rev)
	}
	return nil
}
