package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/electkit/election/internal/clock"
)

// state is the Lease as one view last saw it.
type state struct {
	known bool                  // listed at least once since the view began
	lease *coordinationv1.Lease // nil: there is no such Lease
	rec   record                // lease decoded (zero without one)
	bad   error                 // the Lease cannot be decoded (see readLease)
	// observed is when the record last changed as this view saw it, on
	// the library's clock (a monotonic reading): the expiry of the holder's
	// lease counts from here, as client-go counts it from its observedTime.
	observed time.Time
	err      error // the last failed list or watch, nil once one works again
}

// view follows one Lease with a list and then a watch of that one object
// (field selector metadata.name): no polling, one request stream per view.
// Its goroutine lists again after the watch ends or fails.
type view struct {
	e      *Elector
	mu     sync.Mutex
	cur    state
	notify chan struct{} // closed on every change of cur
	// lists and events count the view's list requests and watch events.
	lists, events int64
}

func newView(e *Elector) *view { return &view{e: e, notify: make(chan struct{})} }

// get returns the current state and a channel closed when it changes.
func (v *view) get() (state, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cur, v.notify
}

// set publishes a Lease read from the server (nil: none).
func (v *view) set(l *coordinationv1.Lease) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old := v.cur
	n := state{known: true, lease: l, observed: old.observed}
	if l != nil {
		n.rec, n.bad = readLease(l)
	}
	if !old.known || (old.lease == nil) != (l == nil) || !sameRecord(old.rec, n.rec) || (old.bad == nil) != (n.bad == nil) {
		n.observed = clock.Now()
	}
	v.cur = n
	close(v.notify)
	v.notify = make(chan struct{})
}

// fail publishes a failed request; the Lease as last seen stays.
func (v *view) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cur.err = err
	close(v.notify)
	v.notify = make(chan struct{})
}

// run follows the Lease until ctx ends.
func (v *view) run(ctx context.Context) {
	e := v.e
	sel := fields.OneTermEqualSelector("metadata.name", e.name).String()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		list, err := e.leases.Leases(e.ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		v.mu.Lock()
		v.lists++
		v.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			v.fail(fmt.Errorf("kube election: listing Lease %s/%s: %w", e.ns, e.name, err))
			clock.Sleep(ctx, backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		var found *coordinationv1.Lease
		for i := range list.Items {
			if list.Items[i].Name == e.name {
				found = &list.Items[i]
			}
		}
		v.set(found)
		err = v.follow(ctx, sel, list.ResourceVersion)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			v.fail(fmt.Errorf("kube election: watching Lease %s/%s: %w", e.ns, e.name, err))
			clock.Sleep(ctx, backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// errWatchEnded: the server ended the watch (its timeout, or a restart).
var errWatchEnded = errors.New("watch ended")

// follow watches the Lease from resourceVersion rv until the watch ends.
func (v *view) follow(ctx context.Context, sel, rv string) error {
	e := v.e
	w, err := e.leases.Leases(e.ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil // list again
			}
			v.mu.Lock()
			v.events++
			v.mu.Unlock()
			switch ev.Type {
			case watch.Added, watch.Modified:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok && l.Name == e.name {
					v.set(l)
				}
			case watch.Deleted:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok && l.Name == e.name {
					v.set(nil)
				}
			case watch.Bookmark:
			case watch.Error:
				st := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(st) || apierrors.IsGone(st) {
					return nil // too old: list again
				}
				return fmt.Errorf("%w: %w", errWatchEnded, st)
			}
		}
	}
}
