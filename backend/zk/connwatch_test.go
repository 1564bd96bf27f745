package zk_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
)

// The leaders of many elections on one connection beat together: each
// tick's heartbeats go out as one multi, so their renewals share their send
// times. A leader whose node another client changed fails its check in
// that multi and its Term ends with ErrSessionLost; the others' checks of
// the same multi are retried and their Terms go on.
func TestLeadersOnOneConnBeatTogether(t *testing.T) {
	const n = 10
	conn := newConn(t)
	admin := newConn(t)
	var mu sync.Mutex
	sents := map[int][]time.Time{} // leader → send times of its confirmed renewals
	terms := make([]*election.Term, n)
	electors := make([]*zk.Elector, n)
	paths := make([]string, n)
	for i := range terms {
		paths[i] = newPath(t)
		e := newElector(t, conn, paths[i], fmt.Sprintf("c%d", i), election.WithAfterRenew(func(r election.Renewal) {
			if r.Err == nil {
				mu.Lock()
				sents[i] = append(sents[i], r.Sent)
				mu.Unlock()
			}
		}))
		electors[i] = e
		terms[i] = lead(t, e)
	}
	renewed := func(atLeast int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for i := range n {
				if len(sents[i]) < atLeast {
					return false
				}
			}
			return true
		}
	}
	eventually(t, "two renewals of every leader", renewed(2))
	mu.Lock()
	distinct, total := map[time.Time]bool{}, 0
	for i := range n {
		for _, s := range sents[i] {
			distinct[s] = true
			total++
		}
	}
	mu.Unlock()
	// One multi per tick: far fewer send times than renewals (each
	// leader's first renewal may fall on its own tick, its confirmation's
	// own check aside).
	if len(distinct) > total/2 {
		t.Errorf("%d renewals were sent at %d distinct instants: the heartbeats of a tick did not go out together", total, len(distinct))
	}

	// Another client changes leader 3's node (a data change: its watch
	// does not end the Term; its heartbeat does).
	node, err := electors[3].FenceKey(terms[3])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Set(node, []byte(`{"v":1,"id":"c3"}`), -1); err != nil {
		t.Fatal(err)
	}
	waitDone(t, terms[3], patience, "leader 3's Term after its node changed")
	if !errors.Is(terms[3].Err(), election.ErrSessionLost) {
		t.Errorf("leader 3's Term ended with %v; want ErrSessionLost", terms[3].Err())
	}
	mu.Lock()
	before := map[int]int{}
	for i := range n {
		before[i] = len(sents[i])
	}
	mu.Unlock()
	eventually(t, "two more renewals of every other leader", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if i != 3 && len(sents[i]) < before[i]+2 {
				return false
			}
		}
		return true
	})
	for i, term := range terms {
		if i != 3 && term.Err() != nil {
			t.Errorf("leader %d's Term ended with %v after another leader's node changed", i, term.Err())
		}
	}
}
