// Package nemesis runs elections under faults and checks what happened: a
// fenced register that leaders write to, the history of every write and
// every leadership, and the checkers that judge it (linearizability of the
// register, no two valid Terms at one instant, increasing tokens, paired
// callbacks, bounded failover).
//
// Every instant in a history ("Mono") is a reading of CLOCK_MONOTONIC
// (internal/mono), one clock shared by every process on the machine, so
// instants reported by different candidate processes can be compared.
package nemesis

// Write is one write to the fenced register, as the register served it.
type Write struct {
	Client string // the writing candidate's ID
	PID    int    // its process (0 for in-process candidates)
	Token  uint64 // the fencing token the write carried
	Value  string
	Call   int64 // Mono: when the candidate invoked the write (before its own work)
	Return int64 // Mono: when the register answered
	OK     bool  // accepted (token ≥ the highest accepted so far, or fencing off)
	// The register's state just before this write.
	PrevToken uint64
	PrevValue string
}

// EventKind names what a candidate reports about its leadership.
type EventKind string

const (
	Elected EventKind = "elected" // OnElected began; Deadline is the Term's
	Renewed EventKind = "renewed" // a renewal moved the Deadline
	Demoted EventKind = "demoted" // OnDemoted ran; Err is the Term's Err
	// Ended: the Term ended (its lease clock's Events.Ended), reported
	// before a hand-over of the leadership is sent; its validity is over.
	// OnDemoted follows.
	Ended EventKind = "ended"
)

// Event is one report of a candidate about one of its Terms.
type Event struct {
	Kind      EventKind
	Candidate string
	PID       int
	Token     uint64
	At        int64  // Mono
	Deadline  int64  // Mono; Elected and Renewed
	Err       string // Demoted
	// Seq numbers the events of one process from 1 (0: unnumbered). A
	// report retried after an answer was lost arrives twice; the register
	// keeps the first of each (Candidate, PID, Seq).
	Seq uint64 `json:",omitempty"`
}

// Fault is one fault the nemesis injected, from Start until End (Mono; End
// is 0 for instantaneous ones such as a SIGKILL).
type Fault struct {
	Kind   string // "kill", "pause", "cut", "store-leader", "expire", "garbage", …
	Target string // candidate ID, member name, …
	PID    int
	Start  int64
	End    int64
	// Acked is, for an operator fault, the Mono instant the store answered
	// the operator's one request that changed the election (Start is when
	// it was sent); 0 when the fault has no such request.
	Acked int64 `json:",omitempty"`
}

// History is everything a run produced.
type History struct {
	Backend string
	Seed    int64
	Fenced  bool
	Start   int64 // Mono
	End     int64 // Mono
	Writes  []Write
	Events  []Event
	Faults  []Fault
	// Killed candidates (by ID, with the Mono instant of the kill): a Term
	// of a killed process has no Demoted event, and its validity ends at
	// its last reported Deadline.
	Killed map[string]int64
}
