package kube

import (
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/electkit/election"
)

// The fake clientset only satisfies the constructor's argument here: no
// request is made. The backend's behaviour is tested against a real API
// server in kubesuite.
func TestNewRefuses(t *testing.T) {
	leases := fake.NewClientset().CoordinationV1()
	for _, c := range []struct {
		ns, name string
		opts     []election.Option
		field    string
	}{
		{"default", "ok", []election.Option{election.WithTTL(1500 * time.Millisecond)}, "TTL"},
		{"Default", "ok", nil, "namespace"},
		{"", "ok", nil, "namespace"},
		{"default", "", nil, "name"},
		{"default", "Not_A_Name", nil, "name"},
		{"default", "ok", []election.Option{election.WithValue(make([]byte, MaxValueSize+1))}, "Value"},
		{"default", "ok", []election.Option{election.WithID("bad id")}, "ID"},
	} {
		_, err := New(leases, c.ns, c.name, c.opts...)
		var oe *election.OptionError
		if !errors.As(err, &oe) || !errors.Is(err, election.ErrInvalidOption) || oe.Field != c.field {
			t.Errorf("New(%q, %q) = %v; want an *election.OptionError for %s", c.ns, c.name, err, c.field)
		}
	}
	if _, err := New(nil, "default", "ok"); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("New(nil) = %v; want ErrInvalidOption", err)
	}
	e, err := New(leases, "default", "ok", election.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if e.seconds != 3 {
		t.Errorf("leaseDurationSeconds %d, want 3", e.seconds)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func lease(rv, holder string, note string) *coordinationv1.Lease {
	secs := int32(2)
	at := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC))
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default", ResourceVersion: rv},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &at, RenewTime: &at},
	}
	if note != "" {
		l.Annotations = map[string]string{Annotation: note}
	}
	return l
}

// A Lease's annotation counts only for its own holder and acquire time,
// with a token below the resourceVersion; anything else reads as a
// holder without a token of ours, and a damaged resourceVersion is
// refused.
func TestReadLease(t *testing.T) {
	const acq = "2026-01-02T03:04:05.678901Z"
	good := `{"holder":"a","acquired":"` + acq + `","token":"7","priority":"3","value":"dg=="}`
	for _, c := range []struct {
		l    *coordinationv1.Lease
		want election.Leader
		bad  bool
	}{
		{lease("9", "a", good), election.Leader{ID: "a", Token: 7, Priority: 3, Value: []byte("v")}, false},
		{lease("9", "b", good), election.Leader{ID: "b"}, false},                                                         // client-go took it over
		{lease("9", "a", strings.Replace(good, acq, "2026-01-02T03:04:05.000000Z", 1)), election.Leader{ID: "a"}, false}, // re-acquired
		{lease("5", "a", good), election.Leader{ID: "a"}, false},                                                         // token above the version
		{lease("9", "a", "{"), election.Leader{ID: "a"}, false},
		{lease("9", "", good), election.Leader{}, false},
		{lease("9", "a b", ""), election.Leader{}, true},
		{lease("x9", "a", good), election.Leader{}, true},
	} {
		r, err := readLease(c.l)
		var l election.Leader
		if err == nil {
			l, err = r.leader()
		}
		if (err != nil) != c.bad || !l.Equal(c.want) {
			t.Errorf("lease rv %s holder %q note %q: %v, %v; want %v (error %v)", c.l.ResourceVersion, *c.l.Spec.HolderIdentity, c.l.Annotations[Annotation], l, err, c.want, c.bad)
		}
	}
}
