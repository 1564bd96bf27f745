package zk

import (
	"context"
	"errors"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
)

// requestName is the transfer request node: ephemeral, of the requester's
// session, its data a transferRequest.
const requestName = "_r"

var _ backend.TransferRequester = (*Elector)(nil)

// RequestTransfer asks the leader to transfer (call it through
// election.RequestTransfer): it creates the request node (ephemeral: it
// goes with this Elector's session), naming the current leader's token,
// then follows the leader (Observe) and the request node until the target
// leads, the leader answers that it cannot, or two lease windows pass; then
// it deletes the node. One request at a time per election: while another is
// pending it fails.
func (e *Elector) RequestTransfer(ctx context.Context, to string) (election.Leader, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return election.Leader{}, err
	}
	cur, err := e.Leader(ctx)
	if err != nil {
		return election.Leader{}, err
	}
	if cur.ID == to {
		return cur, nil
	}
	data := record.EncodeRequest(record.TransferRequest{To: to, Token: cur.Token, By: e.o.ID})
	node := e.path + "/" + requestName
	var cerr error
	if derr := e.do(ctx, e.closing, func() { _, cerr = e.conn.Create(node, data, gozk.FlagEphemeral, e.cfg.NodeACL) }); derr != nil {
		return election.Leader{}, derr
	}
	switch {
	case errors.Is(cerr, gozk.ErrNodeExists):
		return election.Leader{}, fmt.Errorf("%w: zk election %s: another transfer request is pending", election.ErrTransferFailed, e.path)
	case cerr != nil:
		return election.Leader{}, e.readErr("creating a transfer request", cerr)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(e.bg, e.o.Window())
		defer cancel()
		_ = e.do(dctx, nil, func() { _ = e.conn.Delete(node, -1) })
	}()
	bound := 2 * e.o.Window()
	octx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	leaders := e.Observe(octx)
	for {
		var got []byte
		var ev <-chan gozk.Event
		var gerr error
		if derr := e.do(octx, e.closing, func() { got, _, ev, gerr = e.conn.GetW(node) }); derr != nil {
			break
		}
		if gerr != nil {
			return election.Leader{}, fmt.Errorf("%w: zk election %s: the request node: %w", election.ErrTransferFailed, e.path, gerr)
		}
		if r, err := record.DecodeRequest(got); err == nil && r.Error != "" {
			if r.NoCandidate {
				return election.Leader{}, fmt.Errorf("%w: %s answered: %s", election.ErrNoCandidate, cur, r.Error)
			}
			return election.Leader{}, fmt.Errorf("%w: %s answered: %s", election.ErrTransferFailed, cur, r.Error)
		}
	wait:
		for {
			select {
			case l, ok := <-leaders:
				if !ok {
					break wait
				}
				if l.IsZero() || l.Token == cur.Token {
					continue
				}
				if to != "" && l.ID != to {
					return l, fmt.Errorf("%w: %s leads now, not %s", election.ErrTransferFailed, l, to)
				}
				return l, nil
			case <-ev:
				break wait // the request node changed: read it again
			case <-octx.Done():
				break wait
			}
		}
		if octx.Err() != nil {
			break
		}
	}
	switch {
	case ctx.Err() != nil:
		return election.Leader{}, ctx.Err()
	case e.bg.Err() != nil:
		return election.Leader{}, election.ErrClosed
	}
	return election.Leader{}, fmt.Errorf("%w: %s did not hand over within %v (does it run a version that takes transfer requests?)", election.ErrTransferFailed, cur, bound)
}

// requestWatch is a leader's watch on the request node: ch fires when the
// node is created, changed or deleted; mzxid is the node's last change
// (0: absent).
type requestWatch struct {
	ch    <-chan gozk.Event
	mzxid int64
	data  []byte
}

// watchRequest sets the leader's watch on the request node and reads it.
func (e *Elector) watchRequest(c *candidacy) requestWatch {
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	node := e.path + "/" + requestName
	for {
		var ok bool
		var st *gozk.Stat
		var ev <-chan gozk.Event
		var err error
		if derr := e.do(ctx, c.stop, func() { ok, st, ev, err = e.conn.ExistsW(node) }); derr != nil || err != nil {
			return requestWatch{}
		}
		if !ok {
			return requestWatch{ch: ev}
		}
		var data []byte
		var gst *gozk.Stat
		var gev <-chan gozk.Event
		if derr := e.do(ctx, c.stop, func() { data, gst, gev, err = e.conn.GetW(node) }); derr != nil {
			return requestWatch{ch: ev}
		}
		if errors.Is(err, gozk.ErrNoNode) {
			continue // gone between the two reads
		}
		if err != nil {
			return requestWatch{ch: ev}
		}
		_ = st
		return requestWatch{ch: gev, mzxid: gst.Mzxid, data: data}
	}
}

// serveRequest honours the request rw read, if it asks c's leadership at
// token: as Transfer with KeepLeading. A request it cannot honour is
// answered in the node. It reports whether the leadership was handed over.
func (e *Elector) serveRequest(c *candidacy, t *election.Term, rw requestWatch) bool {
	r, err := record.DecodeRequest(rw.data)
	if err != nil || r.Token != c.leader.Token || r.Error != "" {
		return false
	}
	ctx, cancel := context.WithTimeout(e.bg, 2*e.o.Window())
	defer cancel()
	e.log.Info("zk election: transferring the leadership as requested", "path", e.path, "to", r.To, "by", r.By)
	err = e.Transfer(ctx, t, r.To, election.KeepLeading)
	if err == nil {
		return true
	}
	if !errors.Is(err, election.ErrNoCandidate) {
		if t.Err() != nil {
			e.log.Warn("zk election: a requested transfer failed; the normal order resumes", "path", e.path, "to", r.To, "err", err)
			return true
		}
	}
	r.Error, r.NoCandidate = err.Error(), errors.Is(err, election.ErrNoCandidate)
	data := record.EncodeRequest(r)
	node := e.path + "/" + requestName
	var serr error
	if derr := e.do(ctx, c.stop, func() {
		// Only the request read: a node created again since has another
		// creation, and its version starts again; compare the mzxid first.
		var st *gozk.Stat
		if _, st, serr = e.conn.Get(node); serr == nil && st.Mzxid == rw.mzxid {
			_, serr = e.conn.Set(node, data, st.Version)
		}
	}); derr != nil || serr != nil {
		e.log.Warn("zk election: answering a transfer request failed", "path", e.path, "err", errors.Join(derr, serr))
	}
	return false
}
