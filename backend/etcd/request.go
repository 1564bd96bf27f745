package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
)

var _ backend.TransferRequester = (*Elector)(nil)

// RequestTransfer asks the leader to transfer (call it through
// election.RequestTransfer): it puts the request key, naming the leader's
// token (only while that token still leads), and watches the leader key and
// the request key until the target leads, the leader answers that it
// cannot, or two lease windows pass. The request key is deleted before it
// returns.
func (e *Elector) RequestTransfer(ctx context.Context, to string) (election.Leader, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return election.Leader{}, err
	}
	if err := ctx.Err(); err != nil {
		return election.Leader{}, err
	}
	if e.isClosed() {
		return election.Leader{}, election.ErrClosed
	}
	resp, err := e.cli.Get(ctx, e.lay.leader(), clientv3.WithRange(e.lay.leadEnd()))
	if err != nil {
		return election.Leader{}, e.storeErr(ctx, "reading the leader", err)
	}
	keys := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = kv
	}
	if len(resp.Kvs) == 0 {
		return election.Leader{}, fmt.Errorf("%w: no transfer to request in %s", election.ErrNoLeader, e.Name())
	}
	cur, _, err := e.lay.decodeLeader(resp.Kvs[0], 0)
	if err != nil {
		return election.Leader{}, malformed(resp.Kvs[0], err)
	}
	token := resp.Kvs[0].CreateRevision
	if cur.ID == to {
		return cur, nil // it leads already
	}
	b := record.EncodeRequest(record.TransferRequest{To: to, Token: uint64(token), By: e.o.ID})
	put, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(string(resp.Kvs[0].Key)), "=", token)).
		Then(clientv3.OpPut(e.lay.request(), string(b))).Commit()
	if err != nil {
		return election.Leader{}, e.storeErr(ctx, "putting a transfer request", err)
	}
	if !put.Succeeded {
		return election.Leader{}, fmt.Errorf("%w: %s stopped leading as the transfer was requested; nothing was asked of the next leader", election.ErrTransferFailed, cur)
	}
	mine := put.Header.Revision
	last := mine // the request key's revision as last seen: this request, or the leader's answer
	defer func() {
		// The request goes, unless another one replaced it.
		dctx, cancel := context.WithTimeout(e.background(), e.o.Window())
		defer cancel()
		e.cli.Txn(dctx).If(clientv3.Compare(clientv3.ModRevision(e.lay.request()), "=", last)).
			Then(clientv3.OpDelete(e.lay.request())).Commit() //nolint:errcheck // a stale request is ignored by every leader but the one it names
	}()
	bound := 2 * e.o.Window()
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	stop := context.AfterFunc(e.background(), cancel)
	defer stop()
	ch := e.cli.Watch(clientv3.WithRequireLeader(wctx), e.lay.leader(), clientv3.WithRange(after(e.lay.request())), clientv3.WithRev(mine+1))
	for wr := range ch {
		if wr.Err() != nil || wr.Canceled {
			break
		}
		for i, ev := range wr.Events {
			kv := ev.Kv
			if strings.HasPrefix(string(kv.Key), e.lay.leader()) {
				if ev.Type == clientv3.EventTypePut {
					keys[string(kv.Key)] = kv
				} else {
					delete(keys, string(kv.Key))
				}
				if i+1 < len(wr.Events) && wr.Events[i+1].Kv.ModRevision == kv.ModRevision {
					continue // the rest of the same write first (a hand-over deletes two keys)
				}
				if f := first(keys); f != nil && f.CreateRevision != token {
					kv = f
				} else {
					continue
				}
			}
			switch {
			case strings.HasPrefix(string(kv.Key), e.lay.leader()):
				ld, _, err := e.lay.decodeLeader(kv, 0)
				if err != nil {
					return election.Leader{}, fmt.Errorf("%w: the leader key was replaced by one that is not a leader's: %w", election.ErrTransferFailed, malformed(kv, err))
				}
				if to != "" && ld.ID != to {
					return ld, fmt.Errorf("%w: %s leads now, not %s", election.ErrTransferFailed, ld, to)
				}
				e.saw(ld.Token)
				return ld, nil
			case string(kv.Key) == e.lay.request() && ev.Type == clientv3.EventTypeDelete:
				return election.Leader{}, fmt.Errorf("%w: the request was deleted by another client before %s answered", election.ErrTransferFailed, cur)
			case string(kv.Key) == e.lay.request():
				r, err := record.DecodeRequest(kv.Value)
				if err == nil && r.Token == uint64(token) {
					last = kv.ModRevision
				}
				switch {
				case err != nil || r.Token != uint64(token):
					return election.Leader{}, fmt.Errorf("%w: another client replaced the request", election.ErrTransferFailed)
				case r.Error != "" && r.NoCandidate:
					return election.Leader{}, fmt.Errorf("%w: %s answered: %s", election.ErrNoCandidate, cur, r.Error)
				case r.Error != "":
					return election.Leader{}, fmt.Errorf("%w: %s answered: %s", election.ErrTransferFailed, cur, r.Error)
				}
			}
		}
	}
	switch {
	case ctx.Err() != nil:
		return election.Leader{}, ctx.Err()
	case e.background().Err() != nil:
		return election.Leader{}, election.ErrClosed
	}
	return election.Leader{}, fmt.Errorf("%w: %s did not hand over within %v (does it run a version that takes transfer requests?)", election.ErrTransferFailed, cur, bound)
}

// request handles an event of the request key while c leads at token: a
// request naming token is honoured as Transfer with KeepLeading; one the
// leader cannot honour is answered in the key. It reports whether the
// leadership was handed over (the candidacy is over then).
func (f *follower) request(ev *clientv3.Event, token int64) bool {
	if ev.Type != clientv3.EventTypePut {
		return false
	}
	r, err := record.DecodeRequest(ev.Kv.Value)
	if err != nil || r.Token != uint64(token) || r.Error != "" {
		return false
	}
	e, c := f.e, f.c
	ctx, cancel := context.WithTimeout(e.background(), 2*e.o.Window())
	defer cancel()
	w, ok, err := e.target(ctx, c, r.To)
	if err != nil {
		f.answer(ctx, ev.Kv, r, "reading the queue: "+err.Error(), false)
		return false
	}
	if !ok {
		f.answer(ctx, ev.Kv, r, skeleton.NotWaiting(r.To), true)
		return false
	}
	e.o.Logger.Info("etcd election: transferring the leadership as requested", "token", token, "to", w.ld.ID, "by", r.By)
	err = e.handOver(ctx, c, w.kv, w.ld.ID, fmt.Errorf("%w to %s, as %s requested", election.ErrTransferred, w.ld.ID, r.By))
	if err != nil && !errors.Is(err, election.ErrClosed) {
		e.o.Logger.Warn("etcd election: a requested transfer failed; the next leader comes from the normal order", "to", w.ld.ID, "err", err)
	}
	return true
}

// answer puts the leader's reason for not honouring request r into the
// request key, if it still holds r.
func (f *follower) answer(ctx context.Context, kv *mvccpb.KeyValue, r record.TransferRequest, why string, noCandidate bool) {
	r.Error, r.NoCandidate = why, noCandidate
	b := record.EncodeRequest(r)
	_, err := f.e.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(f.e.lay.request()), "=", kv.ModRevision)).
		Then(clientv3.OpPut(f.e.lay.request(), string(b))).Commit()
	if err != nil {
		f.e.o.Logger.Warn("etcd election: answering a transfer request failed", "err", err)
	}
}
