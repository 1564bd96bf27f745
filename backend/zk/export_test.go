package zk

// Clocks returns how many Term clocks e holds for Close to wait on.
func Clocks(e *Elector) int {
	return e.terms.Len()
}

// Reads returns how many children listings and watches e has issued while
// waiting to lead: a handover ahead of it costs O(1) of them (P9), however
// many candidates wait.
func Reads(e *Elector) int64 { return e.reads.Load() }

// EncodePriority and DecodePriority expose the priority field of the
// candidate nodes' names.
var (
	EncodePriority = encodePriority
	DecodePriority = decodePriority
)

// Successor returns the candidate node e's release hands over to while
// e leads (succ.go), or "".
func Successor(e *Elector) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cand == nil || e.cand.succ == nil {
		return ""
	}
	return e.cand.succ.name
}

// Claims returns how many claims e has sent.
func Claims(e *Elector) int64 { return e.claims.Load() }

// NodePrefix is the name a candidate asks ZooKeeper to create, before the
// sequence number.
var NodePrefix = nodePrefix

// ConfirmedTakes returns how many hand-overs e took on a confirmation of
// its session already made, with no sync on their path.
func ConfirmedTakes(e *Elector) int64 { return e.confirmedTakes.Load() }
