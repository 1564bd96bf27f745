package etcd

// Reads returns how many queue reads the Electors issued while waiting,
// in all.
func Reads(es ...*Elector) (sum int64) {
	for _, e := range es {
		sum += e.reads.Load()
	}
	return sum
}

// Clocks returns how many Terms' clocks e still keeps for Close to wait on.
func Clocks(e *Elector) int {
	return e.terms.Len()
}

// Settled reports whether e's candidacy waits on a live watch, or leads
// with its watch live: it issues no read until its watch fires.
func Settled(e *Elector) bool {
	e.mu.Lock()
	c := e.cand
	e.mu.Unlock()
	return c != nil && (c.waiting.Load() || c.watched.Load())
}
