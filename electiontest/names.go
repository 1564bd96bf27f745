package electiontest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// refusedNames are names backend.ValidateName refuses, one or more of each
// kind of fault.
var refusedNames = []string{
	"",
	"services/demo",
	"demo",
	"/",
	"/a/",
	"//a",
	"/a//b",
	"/a/./b",
	"/a/..",
	"/a b",
	"/a:b",
	"/é",
	"/a\x00",
	"/_c",
	"/a/_l",
	"/zookeeper",
	"/zookeeper/x",
	"/" + strings.Repeat("x", backend.MaxNameLen),
}

// acceptedNames are names every backend must take, each under root, an
// absolute one-segment name of the run's own.
func acceptedNames(root string) []string {
	return []string{
		root,
		root + "/a/b/c",
		root + "/svc-1/sched_2/v1.0",
		root + "/a.b/c-d/e_f/..x/y..",
		root + "/zookeeper",
		root + "/" + strings.Repeat("x", backend.MaxNameLen-len(root)-1), // MaxNameLen bytes
	}
}

// Names: the rule of backend.ValidateName is the same on every backend. A
// name it refuses fails the constructor with its very error (wrapping
// election.ErrInvalidOption); a name it accepts (nested, with '.', '-' and
// '_' inside segments, MaxNameLen bytes long) makes a candidate that leads,
// resigns and closes. Needs Harness.Named.
func testNames(w *world) {
	if w.h.Named == nil {
		w.t.Skip("the Harness has no Named: the backend's election names are not checked")
	}
	for _, name := range refusedNames {
		want := backend.ValidateName(name)
		if want == nil {
			w.t.Fatalf("electiontest: backend.ValidateName accepts %q, which the suite expects refused", name)
		}
		e, err := w.h.Named(w.t, name)
		switch {
		case err == nil:
			if e != nil {
				w.close(e)
			}
			w.t.Errorf("name %s: accepted; want %v", backend.QuoteValue(name), want)
		case !errors.Is(err, election.ErrInvalidOption) || err.Error() != want.Error():
			w.t.Errorf("name %s: %v; want %v", backend.QuoteValue(name), err, want)
		}
	}
	root := fmt.Sprintf("/electiontest-%016x", rand.Uint64()) // meets no election of an earlier run
	for i, name := range acceptedNames(root) {
		if err := backend.ValidateName(name); err != nil {
			w.t.Fatalf("electiontest: backend.ValidateName refuses %q, which the suite expects accepted: %v", name, err)
		}
		w.usable(name, fmt.Sprintf("n%d", i))
	}
}

// usable checks that a candidate of the election called name leads,
// resigns and closes.
func (w *world) usable(name, id string) {
	w.t.Helper()
	what := "name " + backend.QuoteValue(name)
	e, err := w.h.Named(w.t, name, election.WithID(id))
	if err != nil {
		w.t.Errorf("%s: %v; want a candidate", what, err)
		return
	}
	if e == nil {
		w.t.Fatalf("%s: Named returned neither an Elector nor an error", what)
	}
	w.t.Cleanup(func() { w.close(e) }) // Close twice does nothing
	ctx, cancel := context.WithTimeout(w.ctx, w.h.Patience)
	defer cancel()
	t, err := e.Campaign(ctx)
	if err != nil {
		w.t.Errorf("%s: Campaign: %v", what, err)
		return
	}
	if terr := t.Err(); terr != nil || t.Leader().ID != id {
		w.t.Errorf("%s: Campaign returned Term %v (%v); want a valid Term of %s", what, t, terr, id)
	}
	if err := e.Resign(ctx); err != nil {
		w.t.Errorf("%s: Resign: %v", what, err)
	}
	w.checkEnded(t, election.ErrResigned)
	if err := w.close(e); err != nil {
		w.t.Errorf("%s: Close: %v", what, err)
	}
}

// NilArguments: a nil ctx is refused, never a panic. Campaign, Resign and
// Leader return an error wrapping election.ErrInvalidOption that names
// ctx and change nothing (a leader's Term stays valid through a refused
// Resign); Observe returns a closed channel. Before any Campaign and
// while leading.
func testNilArguments(w *world) {
	var nilCtx context.Context // a variable: a literal nil ctx is what vet tools flag
	a := w.candidate()
	refused := func(what string, err error) {
		w.t.Helper()
		if !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "ctx") {
			w.t.Errorf("%s = %v; want an error wrapping ErrInvalidOption that names ctx", what, err)
		}
	}
	calls := func(state string) {
		w.t.Helper()
		t, err := a.Campaign(nilCtx)
		if t != nil {
			w.t.Errorf("Campaign(nil) %s returned a Term: %v", state, t)
		}
		refused("Campaign(nil) "+state, err)
		refused("Resign(nil) "+state, a.Resign(nilCtx))
		_, err = a.Leader(nilCtx)
		refused("Leader(nil) "+state, err)
		select {
		case l, ok := <-a.Observe(nilCtx):
			if ok {
				w.t.Errorf("Observe(nil) %s delivered %v; want a closed channel", state, l)
			}
		case <-time.After(w.h.Patience):
			w.t.Errorf("Observe(nil) %s: the channel not closed within %v", state, w.h.Patience)
		}
	}
	calls("before any Campaign")
	t := w.lead(a)
	calls("while leading")
	if err := t.Err(); err != nil {
		w.t.Errorf("the Term ended after calls with a nil ctx: %v", err)
	}
	w.resign(a, t)
}
