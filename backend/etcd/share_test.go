package etcd

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/electkit/election"
)

// The Electors of a Session made with the same Options share one copy;
// any difference, or a renewal hook, gets a copy of its own; sameOptions
// compares every field Options has.
func TestSharedOptions(t *testing.T) {
	compared := []string{"ID", "Value", "Priority", "PreemptAfter", "TTL", "Drift", "Margin", "Logger", "BeforeRenew", "AfterRenew", "Events"}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[election.Options]()) {
		if !slices.Contains(compared, f.Name) {
			t.Errorf("election.Options has a field %s that sameOptions does not compare", f.Name)
		}
	}
	base := func() election.Options {
		o, err := election.NewOptions(election.WithID("p1"), election.WithTTL(10*time.Second), election.WithValue([]byte("v")))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	s := &Session{}
	a, b := s.shared(base()), s.shared(base())
	if a != b {
		t.Error("two Electors made with the same Options hold two copies")
	}
	other := slog.New(slog.DiscardHandler)
	for name, change := range map[string]func(*election.Options){
		"ID":           func(o *election.Options) { o.ID = "p2" },
		"Value":        func(o *election.Options) { o.Value = []byte("w") },
		"nil Value":    func(o *election.Options) { o.Value = nil },
		"Priority":     func(o *election.Options) { o.Priority = 1 },
		"PreemptAfter": func(o *election.Options) { o.PreemptAfter = time.Second },
		"TTL":          func(o *election.Options) { o.TTL = 20 * time.Second },
		"Drift":        func(o *election.Options) { o.Drift /= 2 },
		"Margin":       func(o *election.Options) { o.Margin += time.Millisecond },
		"Logger":       func(o *election.Options) { o.Logger = other },
		"BeforeRenew":  func(o *election.Options) { o.BeforeRenew = func(context.Context, *election.Term) error { return nil } },
		"AfterRenew":   func(o *election.Options) { o.AfterRenew = func(election.Renewal) {} },
		"Events":       func(o *election.Options) { o.Events = &election.Events{} },
	} {
		o := base()
		change(&o)
		got := s.shared(o)
		if got == a {
			t.Errorf("%s differs, and the Options are shared", name)
		}
		if again := s.shared(o); (o.BeforeRenew != nil || o.AfterRenew != nil) == (again == got) {
			t.Errorf("%s: made twice in a row, shared %t", name, again == got)
		}
		a = s.shared(base())
	}
	// Without a Session: a copy each.
	var none *Session
	if x, y := none.shared(base()), none.shared(base()); x == y {
		t.Error("Electors without a Session share their Options")
	}
	if n := unsafe.Sizeof(follower{}); n > 128 {
		t.Errorf("a follower is %d bytes, want at most 128 (a size class; what it rarely needs is in followerRare)", n)
	}
	if n := unsafe.Sizeof(Elector{}); n > 176 {
		t.Errorf("an Elector is %d bytes, want at most 176 (a size class; with its Gate, which it holds by value)", n)
	}
}
