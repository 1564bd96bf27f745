package zk

import (
	"context"
	"errors"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
)

// Fence returns an operation for gozk.Conn.Multi that succeeds only while
// t's leadership node exists at the version it had when last written by
// this candidate: put it first in a Multi with your writes, and they
// commit only while the leadership is current in ZooKeeper (the node goes
// on Resign or Transfer, with the session — or, for a leadership a
// release handed over, once the candidate node goes, with the next claim —
// and with the next claim of any other candidate).
//
//	op, err := e.Fence(term)
//	if err != nil { return err } // ErrNotLeader
//	_, err = conn.Multi(op, &gozk.SetDataRequest{Path: "/config", Data: b, Version: -1})
//
// It returns an error wrapping election.ErrNotLeader when t is not this
// Elector's current, valid Term.
func (e *Elector) Fence(t *election.Term) (*gozk.CheckVersionRequest, error) {
	c, err := e.current(t)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return &gozk.CheckVersionRequest{Path: c.lead, Version: c.version}, nil
}

// FenceKey returns the path of t's leadership node ("_c_<GUID>-lead", whose
// creation zxid is the token and which Fence checks), or an error
// wrapping election.ErrNotLeader when t is not this Elector's current,
// valid Term. Deleting it ends the Term.
func (e *Elector) FenceKey(t *election.Term) (string, error) {
	c, err := e.current(t)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return c.lead, nil
}

func (e *Elector) current(t *election.Term) (*candidacy, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: nil Term", election.ErrNotLeader)
	}
	e.mu.Lock()
	c := e.cand
	e.mu.Unlock()
	if c == nil || c.lc == nil || c.lc.Term() != t {
		return nil, fmt.Errorf("%w: %s is not this candidate's current Term", election.ErrNotLeader, t)
	}
	if err := t.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s ended: %w", election.ErrNotLeader, t, err)
	}
	return c, nil
}

// Proclaim replaces the leader's Value in its leadership node and in the
// leader node (observers see it; the Term and its token stay the same),
// conditional on the leadership node's version, so it fails with
// ErrNotLeader once the leadership is gone. value is checked like
// WithValue's.
func (e *Elector) Proclaim(ctx context.Context, t *election.Term, value []byte) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	if len(value) > election.MaxValueSize {
		return &election.OptionError{Field: "value", Value: fmt.Sprintf("%d bytes", len(value)), Reason: fmt.Sprintf("must be at most %d bytes", election.MaxValueSize)}
	}
	c, err := e.current(t)
	if err != nil {
		return err
	}
	c.writing.Lock()
	defer c.writing.Unlock()
	e.mu.Lock()
	version, lead := c.version, c.lead
	e.mu.Unlock()
	var res []gozk.MultiResponse
	if derr := e.do(ctx, e.closing, func() {
		res, err = e.conn.Multi(&gozk.SetDataRequest{Path: lead, Data: encodeRecord(e.o, value), Version: version},
			&gozk.SetDataRequest{Path: e.path + "/" + leaderName, Data: record.EncodeLeader(e.o, value, c.name), Version: -1})
	}); derr != nil {
		return derr
	}
	switch {
	case err == nil:
		e.mu.Lock()
		c.version = res[0].Stat.Version
		e.mu.Unlock()
		return nil
	case errors.Is(err, gozk.ErrNoNode), errors.Is(err, gozk.ErrBadVersion):
		return fmt.Errorf("%w: node %s: %w", election.ErrNotLeader, lead, err)
	}
	return fmt.Errorf("zk election %s: proclaiming on %s: %w", e.path, lead, err)
}
