package backend_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// A Term built with NewTerm is driven through its LeaseClock: a renewal
// moves the deadline, End ends it with its cause.
func TestNewTerm(t *testing.T) {
	o, err := election.NewOptions(election.WithID("a"))
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	term, lc := backend.NewTerm(o, election.Leader{ID: "a", Token: 3}, sent)
	if lc.Term() != term || term.Token() != 3 || term.Err() != nil {
		t.Fatalf("NewTerm = %v (err %v), clock's Term %v", term, term.Err(), lc.Term())
	}
	if err := lc.BeforeRenew(); err != nil {
		t.Fatalf("BeforeRenew = %v", err)
	}
	later := time.Now()
	if d := lc.Renewed(later, nil); !d.Equal(later.Add(o.Window())) || !term.Deadline().Equal(d) {
		t.Errorf("Renewed = %v, Deadline = %v; want %v", d, term.Deadline(), later.Add(o.Window()))
	}
	if !lc.End(election.ErrResigned) || lc.End(election.ErrClosed) {
		t.Error("End: the first call must end the Term, the second not")
	}
	lc.Wait()
	if !lc.AwaitHooks(backend.HandOverWait) {
		t.Error("AwaitHooks after Wait = false")
	}
	if !errors.Is(term.Err(), election.ErrResigned) {
		t.Errorf("Err = %v, want ErrResigned", term.Err())
	}

	// A Term whose deadline has passed is returned ended.
	old, _ := backend.NewTerm(o, election.Leader{ID: "a", Token: 4}, time.Now().Add(-2*o.TTL))
	if !errors.Is(old.Err(), election.ErrLeaseExpired) {
		t.Errorf("a Term past its deadline: Err = %v, want ErrLeaseExpired", old.Err())
	}
}

func TestValidateID(t *testing.T) {
	if err := backend.ValidateID("node-1"); err != nil {
		t.Errorf("ValidateID(node-1) = %v", err)
	}
	var oe *election.OptionError
	if err := backend.ValidateID("a/b"); !errors.As(err, &oe) || oe.Field != "ID" || !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("ValidateID(a/b) = %v, want an OptionError of Field ID", err)
	}
}

func TestQuoteValueBoundsLongValues(t *testing.T) {
	if got := backend.QuoteValue("/svc"); got != `"/svc"` {
		t.Errorf("QuoteValue(short) = %s", got)
	}
	long := strings.Repeat("é", 600) // 1,200 bytes
	got := backend.QuoteValue(long)
	if len(got) > backend.MaxQuotedLen+32 || !strings.Contains(got, "(1200 bytes)") || !strings.HasPrefix(got, `"éé`) {
		t.Errorf("QuoteValue(1200 bytes) = %s", got)
	}
}
