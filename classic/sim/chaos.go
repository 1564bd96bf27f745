package sim

import (
	"fmt"

	"github.com/electkit/election/classic"
)

// Chaos draws faults at random from the seed while From <= time < Until.
// Each draw picks one action among those allowed: crash a live node (half
// the time the leader some live node believes in), recover a crashed one,
// split the network in two or heal it, make a live node call Start, flip a
// node's eligibility. At Until a partition still in force is healed, so that
// liveness can be judged afterwards; crashed nodes stay crashed.
type Chaos struct {
	From, Until int64
	// MeanGap is the mean number of ticks between two faults (gaps are
	// drawn uniformly from [1, 2·MeanGap−1]).
	MeanGap int64
	// MaxDown is the most nodes crashed at once; 0 means no crashes. At
	// least one node always stays up.
	MaxDown int
	// Partitions allows splitting the network in two.
	Partitions bool
	// Starts allows making a random live node call Start: spurious
	// suspicions and concurrent initiators.
	Starts bool
	// Eligibility allows flipping a live node's eligibility.
	Eligibility bool
	// DropProb is extra message loss while chaos lasts.
	DropProb float64
}

func (c *Chaos) validate() error {
	switch {
	case c.From < 0:
		return fmt.Errorf("%w: Chaos.From %d is negative", ErrConfig, c.From)
	case c.Until < c.From:
		return fmt.Errorf("%w: Chaos.Until %d is before Chaos.From %d", ErrConfig, c.Until, c.From)
	case c.MeanGap < 1:
		return fmt.Errorf("%w: Chaos.MeanGap %d is below 1", ErrConfig, c.MeanGap)
	case c.MaxDown < 0:
		return fmt.Errorf("%w: Chaos.MaxDown %d is negative", ErrConfig, c.MaxDown)
	case !(c.DropProb >= 0 && c.DropProb < 1):
		return fmt.Errorf("%w: Chaos.DropProb %v is not in [0, 1)", ErrConfig, c.DropProb)
	}
	return nil
}

func (s *Sim) chaosGap() int64 {
	g := s.cfg.Chaos.MeanGap
	return 1 + s.chaosRnd.Int64N(2*g-1)
}

// chaos runs one Chaos event and schedules the next.
func (s *Sim) chaos() {
	c := s.cfg.Chaos
	if s.now >= c.Until {
		if s.parted {
			_ = s.act(Action{At: s.now, Op: OpHeal}, false)
		}
		return
	}
	next := min(s.now+s.chaosGap(), c.Until)
	s.pushTimer(next, evChaos, 0)
	s.pending++

	var live, down []int32
	for i := range s.members {
		if s.up[i] {
			live = append(live, int32(i))
		} else {
			down = append(down, int32(i))
		}
	}
	type choice struct {
		op Op
		w  int
	}
	var choices []choice
	if len(down) < c.MaxDown && len(live) > 1 {
		choices = append(choices, choice{OpCrash, 3})
	}
	if len(down) > 0 {
		choices = append(choices, choice{OpRecover, 3})
	}
	if c.Partitions && !s.parted && len(s.members) > 1 {
		choices = append(choices, choice{OpPartition, 1})
	}
	if s.parted {
		choices = append(choices, choice{OpHeal, 2})
	}
	if c.Starts {
		choices = append(choices, choice{OpStart, 2})
	}
	if c.Eligibility {
		choices = append(choices, choice{OpIneligible, 1})
	}
	total := 0
	for _, ch := range choices {
		total += ch.w
	}
	if total == 0 {
		return
	}
	r := s.chaosRnd.IntN(total)
	var op Op
	for _, ch := range choices {
		if r < ch.w {
			op = ch.op
			break
		}
		r -= ch.w
	}
	pick := func(from []int32) classic.ID { return s.members[from[s.chaosRnd.IntN(len(from))]].ID }
	a := Action{At: s.now, Op: op}
	switch op {
	case OpCrash:
		a.ID = pick(live)
		if s.chaosRnd.IntN(2) == 0 {
			// Aim at the leader the first live node believes in.
			if v := s.views[live[0]]; v.HasLeader {
				if j, ok := s.index.get(v.Leader); ok && s.up[j] {
					a.ID = v.Leader
				}
			}
		}
	case OpRecover:
		a.ID = pick(down)
	case OpStart:
		a.ID = pick(live)
	case OpIneligible:
		a.ID = pick(live)
		if j, _ := s.index.get(a.ID); !s.eligible[j] {
			a.Op = OpEligible
		}
	case OpPartition:
		var g [2][]classic.ID
		for _, m := range s.members {
			k := s.chaosRnd.IntN(2)
			g[k] = append(g[k], m.ID)
		}
		if len(g[0]) == 0 || len(g[1]) == 0 {
			full := 0
			if len(g[1]) > 0 {
				full = 1
			}
			k := s.chaosRnd.IntN(len(g[full]))
			g[1-full] = append(g[1-full], g[full][k])
			g[full] = append(g[full][:k:k], g[full][k+1:]...)
		}
		a.Groups = g[:]
	}
	_ = s.act(a, false)
}
