package etcd

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// A stream that the member ends with an error fails the request it was
// answering with that error, and every other request waiting on it with
// one that is not it: a lease refused with permission denied (final: its
// session ends) must not end the other sessions of the client, whose
// renewals were merely queued behind it.
func TestStreamFailureIsTheFirstRequestsAlone(t *testing.T) {
	k := &keeper{}
	ks := &keepStream{k: k, cancel: func() {}}
	k.cur = ks
	first := &keepRequest{id: 1, done: make(chan struct{})}
	second := &keepRequest{id: 2, done: make(chan struct{})}
	ks.pending = []*keepRequest{first, second}

	ks.fail(rpctypes.ErrPermissionDenied)

	for _, r := range []*keepRequest{first, second} {
		select {
		case <-r.done:
		default:
			t.Fatalf("request for lease %d still waits after the stream failed", r.id)
		}
	}
	if !errors.Is(first.err, rpctypes.ErrPermissionDenied) {
		t.Errorf("first request's error = %v; want permission denied", first.err)
	}
	if second.err == nil || errors.Is(second.err, rpctypes.ErrPermissionDenied) {
		t.Errorf("second request's error = %v; want a stream failure that is not permission denied", second.err)
	}
	if k.cur != nil {
		t.Error("the failed stream is still the keeper's: the next renewal would not open another")
	}
	if err := ks.send(&keepRequest{id: 3, done: make(chan struct{})}); err == nil {
		t.Error("send on a failed stream succeeded")
	}
}
