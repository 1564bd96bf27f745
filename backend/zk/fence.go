package zk

import (
	"context"
	"errors"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
)

// CheckOp returns an operation for gozk.Conn.Multi that succeeds only while
// t's node exists at the version it had when last written by this
// candidate: put it first in a Multi with your writes, and they commit only
// while the leadership is current in ZooKeeper (the node goes when the
// session does, or on Resign).
//
//	op, err := e.CheckOp(term)
//	if err != nil { return err } // ErrNotLeader
//	_, err = conn.Multi(op, &gozk.SetDataRequest{Path: "/config", Data: b, Version: -1})
//
// It returns an error wrapping election.ErrNotLeader when t is not this
// Elector's current, valid Term.
func (e *Elector) CheckOp(t *election.Term) (*gozk.CheckVersionRequest, error) {
	c, err := e.current(t)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return &gozk.CheckVersionRequest{Path: c.node, Version: c.version}, nil
}

// Node returns the path of t's node, or an error wrapping
// election.ErrNotLeader when t is not this Elector's current, valid Term.
func (e *Elector) Node(t *election.Term) (string, error) {
	c, err := e.current(t)
	if err != nil {
		return "", err
	}
	return c.node, nil
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

// Proclaim replaces the leader's Value in its node (observers see it; the
// Term and its token stay the same), conditional on the node's version, so
// it fails with ErrNotLeader once the leadership is gone. value is checked
// like WithValue's.
func (e *Elector) Proclaim(ctx context.Context, t *election.Term, value []byte) error {
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
	version := c.version
	e.mu.Unlock()
	var st *gozk.Stat
	if derr := e.do(ctx, e.closing, func() { st, err = e.conn.Set(c.node, encodeRecord(e.o, value), version) }); derr != nil {
		return derr
	}
	switch {
	case err == nil:
		e.mu.Lock()
		c.version = st.Version
		e.mu.Unlock()
		return nil
	case errors.Is(err, gozk.ErrNoNode), errors.Is(err, gozk.ErrBadVersion):
		return fmt.Errorf("%w: node %s: %w", election.ErrNotLeader, c.node, err)
	}
	return fmt.Errorf("zk election %s: proclaiming on %s: %w", e.path, c.node, err)
}
