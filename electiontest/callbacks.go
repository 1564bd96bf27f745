package electiontest

import (
	"context"

	"github.com/electkit/election"
)

// event is one callback of Run, as the suite records it.
type event struct {
	who   string
	kind  string // "elected", "elected-returned", "demoted"
	token uint64
}

// checked is an Elector whose Campaign goes through the world's checks, so
// that Terms won under Run are judged like every other.
type checked struct {
	election.Elector
	w *world
}

func (c checked) Campaign(ctx context.Context) (*election.Term, error) {
	return c.w.campaign(ctx, c.Elector)
}

// checkCallbacks checks P5 on a log of Run callbacks.
func (w *world) checkCallbacks(events []event) {
	w.t.Helper()
	type state struct {
		open     bool
		returned bool
		token    uint64
	}
	st := map[string]*state{}
	var lastElected uint64
	for i, ev := range events {
		s := st[ev.who]
		if s == nil {
			s = &state{}
			st[ev.who] = s
		}
		switch ev.kind {
		case "elected":
			if s.open {
				w.t.Errorf("event %d: %s OnElected(%d) while its term %d is open", i, ev.who, ev.token, s.token)
			}
			if ev.token <= lastElected {
				w.t.Errorf("event %d: OnElected token %d not above the previous %d", i, ev.token, lastElected)
			}
			lastElected = ev.token
			*s = state{open: true, token: ev.token}
		case "elected-returned":
			if !s.open || s.token != ev.token {
				w.t.Errorf("event %d: %s OnElected(%d) returned outside its term", i, ev.who, ev.token)
			}
			s.returned = true
		case "demoted":
			if !s.open || s.token != ev.token {
				w.t.Errorf("event %d: %s OnDemoted(%d) without a matching OnElected", i, ev.who, ev.token)
			}
			if !s.returned {
				w.t.Errorf("event %d: %s OnDemoted(%d) before OnElected returned", i, ev.who, ev.token)
			}
			s.open = false
		}
	}
	for who, s := range st {
		if s.open {
			w.t.Errorf("%s: OnElected(%d) never got its OnDemoted", who, s.token)
		}
	}
	if lastElected == 0 {
		w.t.Errorf("no OnElected at all")
	}
}
