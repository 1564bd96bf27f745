package etcd

import (
	"context"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// This file holds the reads of the queue around a candidacy: the view they
// give, the requests that make it (lookOps, nearOps) and the reading of
// their responses.

// view is one read of the queue around a candidacy.
type view struct {
	rev   int64
	own   *mvccpb.KeyValue   // the candidacy's queue key (keys only), or nil
	above []*mvccpb.KeyValue // up to two keys just above where the read began (keys only)
	// last: above came from the last window, up to the queue's end, so
	// one key alone there heads the queue.
	last     bool
	leader   *mvccpb.KeyValue // the leader key (the first leadership key), or nil
	second   *mvccpb.KeyValue // the leadership key after it: the next in line's reservation, or nil
	old      *mvccpb.KeyValue // a leased key of the previous layout, or nil
	transfer *mvccpb.KeyValue // a pending hand-over's key, or nil
}

// readOpts returns o, with WithSerializable if serializable.
func readOpts(serializable bool, o ...opOption) []opOption {
	if serializable {
		o = append(o, withSerializable())
	}
	return o
}

// lookOps reads c's key, the two keys just above from (the windows of
// aboveOp), the leader key and the first key of each range a key of the
// previous layout would be in.
func (e *Elector) lookOps(c *candidacy, from string, serializable bool) []*pb.RequestOp {
	return e.viewOps(c, serializable, e.lay.aboveOp(from, serializable))
}

// viewOps reads c's key, then what above reads of the queue above it,
// then the leader key, the first key of each range a key of the previous
// layout would be in, and the transfer key.
func (e *Elector) viewOps(c *candidacy, serializable bool, above ...*pb.RequestOp) []*pb.RequestOp {
	opts := func(o ...opOption) []opOption { return readOpts(serializable, o...) }
	return append(append([]*pb.RequestOp{opGet(c.key, opts()...)}, above...),
		e.lay.leadersOp(opts()...),
		opGet(e.lay.name+"/0", opts(withRange(e.lay.name+"/:"), withLimit(1))...),
		opGet(e.lay.name+"/a", opts(withRange(e.lay.name+"/g"), withLimit(1))...),
		opGet(e.lay.transfer(), opts()...))
}

// nearOps reads c's key, up to aboveLimit keys of the first window above from,
// and the leader key: what a write carries (a read of every window is a
// read-only look's, or the claim's).
func (e *Elector) nearOps(c *candidacy, from string) []*pb.RequestOp {
	return []*pb.RequestOp{
		opGet(c.key),
		opGet(from, withRange(e.lay.firstWindow(from)), withLimit(aboveLimit)),
		e.lay.leadersOp(),
		opGet(e.lay.transfer()),
	}
}

// aboveLimit is how many keys a read of a window above a candidate takes:
// the two it keeps (above), and the hand-over mark that may sort between
// them (dropMarks).
const aboveLimit = 3

// createOps is what a queue key's create reads once it has put the key:
// nearOps but for the key itself, which the create made, and with the
// first window, or the second if the first is empty (createAboveOp). A
// create's operations are in etcd's log, which it keeps in memory, and a
// burst holds tens of thousands of them.
func (e *Elector) createOps(from string) []*pb.RequestOp {
	return []*pb.RequestOp{
		e.createAboveOp(from),
		e.lay.leadersOp(),
		opGet(e.lay.transfer()),
	}
}

// createAboveOp reads the first window above from, or, when that is
// empty, the second (up to createWindow): a nested transaction whose
// Compare visits the first window's keys, so a create in a queue
// filling up reads the few keys near its own and a burst's create,
// whose key ahead arrived tens to hundreds of revisions earlier, finds
// it without a read of the queue after.
func (e *Elector) createAboveOp(from string) *pb.RequestOp {
	w1, w2 := e.lay.firstWindow(from), e.lay.createWindow(from)
	first := opGet(from, withRange(w1), withLimit(aboveLimit))
	if w2 == w1 {
		return first
	}
	return opTxn([]*pb.Compare{emptyIn(from, w1)},
		[]*pb.RequestOp{opGet(w1, withRange(w2), withLimit(aboveLimit))},
		[]*pb.RequestOp{first})
}

// createAbove reads the response of createAboveOp(from): the keys it
// read, and whether they came from the last window.
func (e *Elector) createAbove(r *pb.ResponseOp, from string) (kvs []*mvccpb.KeyValue, last bool) {
	w1 := e.lay.firstWindow(from)
	t := r.GetResponseTxn()
	switch {
	case t == nil:
		return r.GetResponseRange().GetKvs(), w1 == e.lay.queueEnd()
	case len(t.Responses) == 0:
		return nil, false
	case t.Succeeded: // the first window is empty: the second was read
		return t.Responses[0].GetResponseRange().GetKvs(), e.lay.createWindow(from) == e.lay.queueEnd()
	}
	return t.Responses[0].GetResponseRange().GetKvs(), w1 == e.lay.queueEnd()
}

// createElseOps is what is read after a refused create: c's key (an
// earlier try's, whose reply was lost) and the leadership keys (one whose
// candidate sorts behind c's arrival refuses it).
func (e *Elector) createElseOps(c *candidacy) []*pb.RequestOp {
	return []*pb.RequestOp{opGet(c.key), e.lay.leadersOp()}
}

// createView reads the responses of createOps(from) after the create of
// c's key, own, at rev.
func (e *Elector) createView(rev int64, rs []*pb.ResponseOp, from string, own *mvccpb.KeyValue) *view {
	v := &view{rev: rev, own: own}
	above, last := e.createAbove(rs[0], from)
	v.above, v.last = e.lay.dropMarks(above, 2), last
	v.leader, v.second = leaders(rs[1])
	if kvs := rs[2].GetResponseRange().GetKvs(); len(kvs) > 0 {
		v.transfer = kvs[0]
	}
	return v
}

// leaders returns the first two leadership keys a leadersOp read.
func leaders(r *pb.ResponseOp) (first, second *mvccpb.KeyValue) {
	kvs := r.GetResponseRange().GetKvs()
	if len(kvs) > 0 {
		first = kvs[0]
	}
	if len(kvs) > 1 {
		second = kvs[1]
	}
	return first, second
}

// nearView reads the responses of nearOps(c, from). Its above holds keys
// of the first window only: empty, it says nothing of the windows beyond
// unless the first is the last.
func (e *Elector) nearView(rev int64, rs []*pb.ResponseOp, from string) *view {
	v := &view{rev: rev, last: e.lay.firstWindow(from) == e.lay.queueEnd()}
	if kvs := rs[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		v.own = kvs[0]
	}
	v.above = e.lay.dropMarks(rs[1].GetResponseRange().GetKvs(), 2)
	v.leader, v.second = leaders(rs[2])
	if kvs := rs[3].GetResponseRange().GetKvs(); len(kvs) > 0 {
		v.transfer = kvs[0]
	}
	return v
}

// parseView reads the responses of lookOps(c, from, …).
func (e *Elector) parseView(rev int64, rs []*pb.ResponseOp, from string) *view {
	v := &view{rev: rev}
	v.above, v.last = readAbove(rs[1], len(e.lay.windows(from)))
	v.above = e.lay.dropMarks(v.above, 2)
	e.viewRest(v, rs, 2)
	return v
}

// viewRest reads what viewOps reads besides the queue above c into v:
// c's key (rs[0]), and the leader keys, the ranges of the previous
// layout and the transfer key (from rs[at] on).
func (e *Elector) viewRest(v *view, rs []*pb.ResponseOp, at int) {
	get := func(i int) []*mvccpb.KeyValue { return rs[i].GetResponseRange().GetKvs() }
	if kvs := get(0); len(kvs) > 0 {
		v.own = kvs[0]
	}
	v.leader, v.second = leaders(rs[at])
	if kvs := get(at + 3); len(kvs) > 0 {
		v.transfer = kvs[0]
	}
	for _, i := range []int{at + 1, at + 2} {
		for _, kv := range get(i) {
			if e.oldLayout(kv) {
				v.old = kv
			}
		}
	}
}

// oldLayout reports whether kv is a candidate key of the layout before
// this one: the prefix plus 16 lower-case hex digits, under a lease. Such
// a candidate of an older version of this package may lead by that
// layout's rules, so while one heads its range no candidate creates the
// leader key.
func (e *Elector) oldLayout(kv *mvccpb.KeyValue) bool {
	s, ok := e.lay.cutPrefix(string(kv.Key))
	if !ok || len(s) != 16 || kv.Lease == 0 || s != strings.ToLower(s) {
		return false
	}
	_, err := strconv.ParseUint(s, 16, 64)
	return err == nil
}

// look reads the queue above from. It reads the windows two at a time in
// transactions of ranges alone, which etcd serves as reads (no Raft
// entry, nothing in its log), for up to quickReads of them; only when
// those windows are empty and the queue goes on does it walk the rest, in
// nested transactions, which etcd makes a write (a transaction with one
// nested is logged whole, however read-only). Right after the watch
// reported a deletion at revision floor > 0, a serializable read is tried
// first and used only if the member that answered had applied the
// deletion; otherwise it is done again, linearizably. What it decides is
// checked again by the transaction that creates the leader key, so a read
// of a committed state at or after the deletion is enough, and spares a
// round of Raft heartbeats (ReadIndex) on the handover's path.
func (e *Elector) look(ctx context.Context, c *candidacy, from string, floor int64) (*view, error) {
	e.reads.Add(1)
	lo := from
	ends := e.lay.windowEnds(from, 2*quickReads)
	for i := 0; i < quickReads && lo != e.lay.queueEnd(); i++ {
		w1 := ends[min(2*i, len(ends)-1)]
		w2 := ends[min(2*i+1, len(ends)-1)]
		resp, err := e.commit(ctx, true, newTxn().Then(e.quickOps(c, lo, w1, w2, floor > 0)...))
		if err != nil {
			return nil, err
		}
		if floor > 0 && resp.Header.Revision < floor {
			floor, i = 0, i-1 // that member lags behind the deletion: read linearizably
			continue
		}
		if v, ok := e.quickView(resp.Header.Revision, resp.Responses, w1, w2); ok {
			return v, nil
		}
		lo = w2
	}
	resp, err := e.commit(ctx, true, newTxn().Then(e.lookOps(c, lo, false)...))
	if err != nil {
		return nil, err
	}
	return e.parseView(resp.Header.Revision, resp.Responses, lo), nil
}

// quickReads is how many reads of two windows each look makes before it
// walks the rest in a write: in a queue filling up the key ahead is most
// often in the first window, and its reads count the keys of the windows
// they read (etcd counts every key of a range, limit or not), while a
// burst of elections started at once spreads the arrivals of one
// election's candidates over hundreds of revisions.
const quickReads = 2

// quickOps reads what lookOps does, with the windows [from, w1) and [w1,
// w2) for aboveOp's walk: ranges alone.
func (e *Elector) quickOps(c *candidacy, from, w1, w2 string, serializable bool) []*pb.RequestOp {
	return e.viewOps(c, serializable,
		opGet(from, readOpts(serializable, withRange(w1), withLimit(aboveLimit))...),
		opGet(w1, readOpts(serializable, withRange(w2), withLimit(aboveLimit))...))
}

// quickView reads the responses of quickOps(…, w1, w2, …); ok is false
// when both windows are empty and the queue goes on past w2.
func (e *Elector) quickView(rev int64, rs []*pb.ResponseOp, w1, w2 string) (v *view, ok bool) {
	get := func(i int) []*mvccpb.KeyValue { return e.lay.dropMarks(rs[i].GetResponseRange().GetKvs(), 2) }
	v = &view{rev: rev}
	switch {
	case len(get(1)) > 0:
		v.above, v.last = get(1), w1 == e.lay.queueEnd()
	case w1 == e.lay.queueEnd():
		v.last = true
	case len(get(2)) > 0:
		v.above, v.last = get(2), w2 == e.lay.queueEnd()
	case w2 == e.lay.queueEnd():
		v.last = true
	default:
		return nil, false
	}
	e.viewRest(v, rs, 3)
	return v, true
}
