package election_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// plain is an Elector without the optional interfaces.
type plain struct{ election.Elector }

func TestTransferArguments(t *testing.T) {
	ctx := context.Background()
	term, _ := backend.NewTerm(must(election.NewOptions()), election.Leader{ID: "a", Token: 1}, time.Now())
	for _, c := range []struct {
		name string
		to   string
		fb   election.Fallback
		t    *election.Term
		want error
		text string
	}{
		{"bad fallback", "b", election.Fallback(7), term, election.ErrInvalidOption, "Fallback(7)"},
		{"bad target", "b/c", election.KeepLeading, term, election.ErrInvalidOption, `Transfer target = "b/c"`},
		{"no term", "b", election.KeepLeading, nil, election.ErrNotLeader, "no Term"},
		{"unsupported", "b", election.StepDown, term, errors.ErrUnsupported, "cannot transfer"},
	} {
		err := election.Transfer(ctx, plain{}, c.t, c.to, c.fb)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: Transfer = %v, want %v mentioning %q", c.name, err, c.want, c.text)
		}
	}
	if err := term.Err(); err != nil {
		t.Errorf("a refused Transfer ended the Term: %v", err)
	}
	if _, err := election.Candidates(ctx, plain{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Candidates on an Elector without Lister = %v, want ErrUnsupported", err)
	}
	if got := election.StepDown.String(); got != "StepDown" {
		t.Errorf("StepDown.String() = %q", got)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A nil ctx or a nil Elector (untyped, or a nil pointer of a backend's
// type) is refused with an error naming it, never a panic.
func TestNilArguments(t *testing.T) {
	var nilCtx context.Context // a variable: a literal nil ctx is what vet tools flag
	ctx := context.Background()
	term, _ := backend.NewTerm(must(election.NewOptions()), election.Leader{ID: "a", Token: 1}, time.Now())
	for _, c := range []struct {
		name, field string
		call        func() error
	}{
		{"Run(nil ctx)", "ctx", func() error { return election.Run(nilCtx, plain{}, election.Callbacks{}) }},
		{"Run(nil Elector)", "Elector", func() error { return election.Run(ctx, nil, election.Callbacks{}) }},
		{"Transfer(nil ctx)", "ctx", func() error { return election.Transfer(nilCtx, plain{}, term, "", election.KeepLeading) }},
		{"Transfer(nil Elector)", "Elector", func() error { return election.Transfer(ctx, nil, term, "", election.KeepLeading) }},
		{"Candidates(nil ctx)", "ctx", func() error { _, err := election.Candidates(nilCtx, plain{}); return err }},
		{"Candidates(nil Elector)", "Elector", func() error { _, err := election.Candidates(ctx, nil); return err }},
		{"RequestTransfer(nil ctx)", "ctx", func() error { _, err := election.RequestTransfer(nilCtx, plain{}, ""); return err }},
		{"RequestTransfer(nil Elector)", "Elector", func() error { _, err := election.RequestTransfer(ctx, nil, ""); return err }},
		// A nil pointer of a backend's type: an Elector whose New failed.
		{"Run(nil *plain)", "Elector", func() error { return election.Run(ctx, (*plain)(nil), election.Callbacks{}) }},
		{"Transfer(nil *plain)", "Elector", func() error { return election.Transfer(ctx, (*plain)(nil), term, "", election.KeepLeading) }},
		{"Candidates(nil *plain)", "Elector", func() error { _, err := election.Candidates(ctx, (*plain)(nil)); return err }},
		{"RequestTransfer(nil *plain)", "Elector", func() error { _, err := election.RequestTransfer(ctx, (*plain)(nil), ""); return err }},
	} {
		err := c.call()
		var oe *election.OptionError
		if !errors.Is(err, election.ErrInvalidOption) || !errors.As(err, &oe) || oe.Field != c.field || !strings.Contains(oe.Value, "nil") {
			t.Errorf("%s = %v, want an *OptionError for %s = nil", c.name, err, c.field)
		}
	}
	if err := term.Err(); err != nil {
		t.Errorf("a refused Transfer ended the Term: %v", err)
	}
}
