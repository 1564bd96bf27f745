package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
)

// A waiting candidate of this backend registers in a Lease of its own, a
// candidate record, so that the others and the leader see who waits, with
// which priority, since when: the order of priority, preemption and
// transfer. The record is named after the election's Lease and the
// candidate's ID, labelled with the election, renewed by its waiter every
// third of the lease window, and deleted when the candidacy ends; one that
// is not renewed lapses after its leaseDurationSeconds.
const (
	// CandidateLabel labels the candidate records of one election: its
	// value is a hash of the election's Lease name.
	CandidateLabel = "election.electkit.io/candidate-of"
	// CandidateAnnotation holds a candidate record's priority, value and
	// the resourceVersion of its creation (its place among equals).
	CandidateAnnotation = "election.electkit.io/candidate"
	// candidateSuffix is "-c-" and 12 hex digits.
	candidateSuffix = 15
	// MaxNameLen bounds an election's Lease name on this backend, so that
	// its candidate records' names fit the API server's 253.
	MaxNameLen = 253 - candidateSuffix
)

type candNote struct {
	Priority int64  `json:"priority,string"`
	Value    []byte `json:"value,omitempty"`
	Since    uint64 `json:"since,string,omitempty"`
}

func (e *Elector) candidateName(id string) string {
	h := sha256.Sum256([]byte(id))
	return e.name + "-c-" + hex.EncodeToString(h[:6])
}

func (e *Elector) candidateLabel() string {
	h := sha256.Sum256([]byte(e.name))
	return hex.EncodeToString(h[:16])
}

// waiting is one candidate of the election as its record says.
type waiting struct {
	election.Candidate
	since uint64
}

// list reads the live candidate records of the election, the holder of
// the Lease left out, in the order they would lead: highest Priority
// first, then the earliest registered. A record counts as live until its
// renewTime plus leaseDurationSeconds on this process's wall clock: the
// order is advice, never a guarantee (the Lease's conditional updates
// are).
func (e *Elector) list(ctx context.Context, holder string) ([]waiting, error) {
	l, err := e.leases.Leases(e.ns).List(ctx, metav1.ListOptions{LabelSelector: CandidateLabel + "=" + e.candidateLabel()})
	if err != nil {
		return nil, e.requestErr(ctx, "listing the candidates of", err)
	}
	now := clock.Now()
	var ws []waiting
	for _, c := range l.Items {
		if c.Spec.HolderIdentity == nil || c.Spec.RenewTime == nil || c.Spec.LeaseDurationSeconds == nil {
			continue
		}
		id := *c.Spec.HolderIdentity
		if id == holder || backend.ValidateID(id) != nil || c.Name != e.candidateName(id) {
			continue
		}
		if c.Spec.RenewTime.Add(time.Duration(*c.Spec.LeaseDurationSeconds) * time.Second).Before(now) {
			continue
		}
		var n candNote
		if err := json.Unmarshal([]byte(c.Annotations[CandidateAnnotation]), &n); err != nil {
			continue
		}
		if n.Since == 0 {
			n.Since, _ = strconv.ParseUint(c.ResourceVersion, 10, 64) // not renewed yet: created at this version
		}
		ws = append(ws, waiting{election.Candidate{ID: id, Value: n.Value, Priority: n.Priority}, n.Since})
	}
	slices.SortFunc(ws, func(a, b waiting) int {
		switch {
		case a.Priority != b.Priority:
			if a.Priority > b.Priority {
				return -1
			}
			return 1
		case a.since != b.since:
			if a.since < b.since {
				return -1
			}
			return 1
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return ws, nil
}

// Candidates implements backend.Lister: the candidates waiting in the
// election, in the order they would lead. It costs one read of the Lease
// and one list of the candidate records.
func (e *Elector) Candidates(ctx context.Context) ([]election.Candidate, error) {
	holder := ""
	l, err := e.leases.Leases(e.ns).Get(ctx, e.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, e.requestErr(ctx, "reading", err)
	default:
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
	}
	ws, err := e.list(ctx, holder)
	if err != nil {
		return nil, err
	}
	cs := make([]election.Candidate, len(ws))
	for i, w := range ws {
		cs[i] = w.Candidate
	}
	return cs, nil
}

// registration is a waiting candidate's record and the goroutine that
// renews it.
type registration struct {
	e      *Elector
	mu     sync.Mutex
	lease  *coordinationv1.Lease
	since  uint64
	cancel context.CancelFunc
	done   chan struct{}
}

// register creates (or takes over) the candidate's record and starts
// renewing it.
func (e *Elector) register(ctx context.Context) (*registration, error) {
	now := microNow(clock.Now())
	id := e.o.ID
	note, _ := json.Marshal(candNote{Priority: e.o.Priority, Value: e.o.Value})
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: e.candidateName(id), Namespace: e.ns,
			Labels:      map[string]string{CandidateLabel: e.candidateLabel()},
			Annotations: map[string]string{CandidateAnnotation: string(note)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &e.seconds, AcquireTime: now, RenewTime: now},
	}
	got, err := e.leases.Leases(e.ns).Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Left by an earlier candidacy of this ID: made anew, so that it
		// queues from now.
		_ = e.leases.Leases(e.ns).Delete(ctx, l.Name, metav1.DeleteOptions{})
		got, err = e.leases.Leases(e.ns).Create(ctx, l, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, e.requestErr(ctx, "registering the candidate "+backend.QuoteValue(id)+" of", err)
	}
	since, _ := strconv.ParseUint(got.ResourceVersion, 10, 64)
	rctx, cancel := context.WithCancel(e.bg)
	r := &registration{e: e, lease: got, since: since, cancel: cancel, done: make(chan struct{})}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(r.done)
		r.renew(rctx)
	}()
	return r, nil
}

// renew renews the record every renewEvery until ctx ends.
func (r *registration) renew(ctx context.Context) {
	e := r.e
	every := e.renewEvery()
	for clock.Sleep(ctx, every) {
		r.mu.Lock()
		cur := r.lease.DeepCopy()
		r.mu.Unlock()
		cur.Spec.RenewTime = microNow(clock.Now())
		note, _ := json.Marshal(candNote{Priority: e.o.Priority, Value: e.o.Value, Since: r.since})
		cur.Annotations[CandidateAnnotation] = string(note)
		got, err := e.leases.Leases(e.ns).Update(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Changed or deleted by another client (an update of a
			// deleted object fails its UID precondition: a conflict).
			got, err = e.leases.Leases(e.ns).Get(ctx, cur.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				// Registered anew, at the back of its priority.
				cur.ResourceVersion, cur.UID = "", ""
				cur.Annotations[CandidateAnnotation] = string(mustJSON(candNote{Priority: e.o.Priority, Value: e.o.Value}))
				if got, err = e.leases.Leases(e.ns).Create(ctx, cur, metav1.CreateOptions{}); err == nil {
					r.mu.Lock()
					r.since, _ = strconv.ParseUint(got.ResourceVersion, 10, 64)
					r.mu.Unlock()
				}
			}
			// Otherwise renewed at the next tick, within the window.
		}
		if err != nil {
			if ctx.Err() == nil {
				e.warn("kube election: renewing the candidate record failed", "lease", e.lease(), "record", cur.Name, "err", err)
			}
			continue
		}
		r.mu.Lock()
		r.lease = got
		r.mu.Unlock()
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// withdraw stops renewing the record and deletes it, within ctx.
func (r *registration) withdraw(ctx context.Context) {
	r.cancel()
	<-r.done
	r.mu.Lock()
	name := r.lease.Name
	r.mu.Unlock()
	err := r.e.leases.Leases(r.e.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) && r.e.bg.Err() == nil {
		r.e.log.Warn("kube election: deleting the candidate record failed; it lapses after its duration", "lease", r.e.lease(), "record", name, "err", err)
	}
}

// withdrawLater withdraws r on a goroutine of e's, within one lease
// window: for a Campaign that must return at once.
func (e *Elector) withdrawLater(r *registration) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
		defer cancel()
		r.withdraw(ctx)
	}()
}

// preferred is the candidate the release in s handed the Lease to
// (HandOverAnnotation), or "".
func preferred(s state) string {
	raw, ok := s.lease.Annotations[HandOverAnnotation]
	if !ok || s.rec.holder != "" {
		return ""
	}
	var n handOverNote
	if json.Unmarshal([]byte(raw), &n) != nil || n.At != s.rec.renewed {
		return ""
	}
	return n.To
}

// mayTake decides, for a Lease that is free, whether this candidate takes
// it now: the release named it; or it named nobody (or someone who has
// not taken it within a lease window) and this candidate heads the live
// candidates. Otherwise it returns how long to wait before deciding again
// (an event of the Lease comes sooner when one happens).
//
// The order is advice: a Lease that has stayed free for a whole TTL since
// this candidate saw it become free goes to whoever takes it first, so
// that a head that never comes (a dead candidate whose record a clock far
// ahead keeps live) cannot stall the election.
func (e *Elector) mayTake(ctx context.Context, s state) (bool, time.Duration, error) {
	freeAt := s.observed
	if s.rec.holder != "" {
		freeAt, _ = expiry(s)
	}
	if clock.Since(freeAt) >= e.o.TTL {
		return true, 0, nil
	}
	pref := preferred(s)
	switch {
	case pref == e.o.ID:
		return true, 0, nil
	case pref != "":
		if left := e.o.Window() - clock.Since(s.observed); left > 0 {
			return false, left, nil
		}
	}
	ws, err := e.list(ctx, s.rec.holder)
	if err != nil {
		return false, 0, err
	}
	if len(ws) == 0 || ws[0].ID == e.o.ID {
		return true, 0, nil
	}
	// The head of the queue should take it at once; if it does not (it
	// died), its record lapses and the next decision finds another head.
	return false, min(e.renewEvery(), clock.Until(freeAt.Add(e.o.TTL))), nil
}

// successor is the head of the waiting candidates, whom a release names
// in its handover annotation: that one takes the Lease on the release's
// watch event, and the others, who see it named, send nothing (one list,
// the leader's, per handover instead of one per waiter). "" when none
// waits or the list fails: then every waiter lists.
func (e *Elector) successor(ctx context.Context) string {
	ws, err := e.list(ctx, e.o.ID)
	if err != nil || len(ws) == 0 {
		return ""
	}
	return ws[0].ID
}

// errPreempted wraps election.ErrPreempted with who preempted.
func errPreempted(w waiting) error {
	return fmt.Errorf("%w: by %s (priority %d)", election.ErrPreempted, backend.QuoteValue(w.ID), w.Priority)
}
