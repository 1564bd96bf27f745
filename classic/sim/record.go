package sim

import (
	"slices"

	"github.com/electkit/election/classic"
)

// Recording is a run kept as data (Config.Record): every message with its
// send and arrival times, and every action, in the order they happened.
type Recording struct {
	Messages []Sent
	Actions  []Action // Start, crash, recover, eligibility, partition, heal, with their times
}

// Sent is one message of a recorded run.
type Sent struct {
	Kind     classic.Kind
	From, To classic.ID
	At       int64  // sent at
	Arrive   int64  // delivered (or dropped on arrival) at; At when lost as sent
	Lost     string // why it never arrived ("lost", "partition", "no link", "down"), or ""
	Election bool   // election traffic (not Heartbeat or Ack)
}

// Record returns what the run recorded so far (Config.Record), read-only.
func (s *Sim) Record() Recording {
	return Recording{Messages: s.rec.Messages[:len(s.rec.Messages):len(s.rec.Messages)], Actions: slices.Clip(s.rec.Actions)}
}

func (s *Sim) recordSend(m *classic.Message, arrive int64, lost string) int32 {
	if !s.cfg.Record {
		return 0
	}
	s.rec.Messages = append(s.rec.Messages, Sent{Kind: m.Kind, From: m.From, To: m.To, At: s.now, Arrive: arrive, Lost: lost, Election: isElection(m.Kind)})
	return int32(len(s.rec.Messages))
}

func (s *Sim) recordDrop(rec int32, why string) {
	if rec != 0 {
		s.rec.Messages[rec-1].Lost = why
	}
}

func (s *Sim) recordAction(a Action) {
	if s.cfg.Record {
		a.At = s.now
		s.rec.Actions = append(s.rec.Actions, a)
	}
}
