package etcd

// Reads returns how many queue reads e issued while waiting.
func Reads(e *Elector) int64 { return e.reads.Load() }

// Clocks returns how many Terms' clocks e still keeps for Close to wait on.
func Clocks(e *Elector) int {
	return e.terms.Len()
}
