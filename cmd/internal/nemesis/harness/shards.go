package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/cmd/internal/nemesis"
)

// NameShards is the name of the verdict on the shard-heavy candidates'
// side elections (Config.Shards).
const NameShards = "side elections"

// shardCheck gathers what the run found of the shard-heavy candidates'
// side elections: who led them once the faults were over, and how each
// shard-heavy process ended.
type shardCheck struct {
	mu      sync.Mutex
	checked bool          // the leaders were looked at
	elected time.Duration // how long after the quiet period all were led
	missing []string      // elections with no live shard-heavy leader, "name: what"
	others  int           // of how many
	ended   []string      // shard-heavy processes that did not end cleanly, "id: how"
	stops   int           // shard-heavy processes stopped or exited
	note    string        // why the leaders were not looked at
}

// stopped records how the shard-heavy candidate id ended: err nil for a
// clean exit, within its grace, after SIGTERM (its Electors all closed).
func (s *shardCheck) stopped(id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops++
	if err != nil {
		s.ended = append(s.ended, fmt.Sprintf("%s: %v", id, err))
	}
}

func (s *shardCheck) verdict() nemesis.Verdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := nemesis.Verdict{Name: NameShards, OK: len(s.missing) == 0 && len(s.ended) == 0}
	var parts []string
	switch {
	case !s.checked:
		parts = append(parts, "leaders not looked at: "+s.note)
	case len(s.missing) == 0:
		parts = append(parts, fmt.Sprintf("all %d led by a live shard-heavy candidate %v after the quiet period", s.others, s.elected.Round(time.Millisecond)))
	default:
		shown := s.missing[:min(3, len(s.missing))]
		parts = append(parts, fmt.Sprintf("%d of %d with no live shard-heavy candidate leading after the quiet period (%s)",
			len(s.missing), s.others, strings.Join(shown, "; ")))
	}
	if len(s.ended) == 0 {
		parts = append(parts, fmt.Sprintf("%d shard-heavy processes ended cleanly", s.stops))
	} else {
		parts = append(parts, fmt.Sprintf("%d of %d shard-heavy processes did not end cleanly (%s)", len(s.ended), s.stops, strings.Join(s.ended, "; ")))
	}
	v.Detail = strings.Join(parts, "; ")
	return v
}

// checkShards waits, after the quiet period, until every side election of
// the shard-heavy candidates is led by one of them that still runs, for
// at most twice the failover bound, and records what it found. The
// store's view of each leader is the library's own (Elector.Leader of
// an observer that never campaigns).
func (r *run) checkShards(ctx context.Context) {
	r.smu.Lock()
	var live []string
	for _, p := range r.procs {
		if r.sharded(p.id) {
			live = append(live, p.id)
		}
	}
	r.smu.Unlock()
	s := r.shards
	if len(live) == 0 {
		s.mu.Lock()
		s.note = "no shard-heavy candidate runs at the end"
		s.mu.Unlock()
		r.logf("shards: no shard-heavy candidate runs at the end")
		return
	}
	names := make([]string, r.cfg.Shards)
	for i := range names {
		names[i] = ShardName(r.st.election(), i)
	}
	start := time.Now()
	deadline := start.Add(2 * FailoverBound(r.cfg.TTL))
	var missing []string
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		leaders, err := r.st.leaders(lctx, names)
		cancel()
		missing = missing[:0]
		for _, name := range names {
			l, ok := leaders[name]
			switch {
			case ok && l.err == nil && slices.Contains(live, l.id):
				continue
			case ok && l.err == nil:
				missing = append(missing, fmt.Sprintf("%s: led by %s, not a live shard-heavy candidate (%s)", name, l.id, strings.Join(live, ", ")))
			case ok && errors.Is(l.err, election.ErrNoLeader):
				missing = append(missing, name+": no leader")
			case ok:
				missing = append(missing, fmt.Sprintf("%s: %v", name, l.err))
			default:
				missing = append(missing, fmt.Sprintf("%s: %v", name, err))
			}
		}
		if len(missing) == 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		if sleep(ctx, 200*time.Millisecond) != nil { // polling the store until they all lead
			break
		}
	}
	sort.Strings(missing)
	s.mu.Lock()
	s.checked, s.elected, s.others = true, time.Since(start), len(names)
	s.missing = slices.Clone(missing)
	s.mu.Unlock()
	r.logf("shards: %d elections of %s; %d without a live leader after %v", len(names), strings.Join(live, ", "), len(missing),
		time.Since(start).Round(time.Millisecond))
}

// sideLeader is one side election's leader as the store names it.
type sideLeader struct {
	id  string
	err error // election.ErrNoLeader when none
}
