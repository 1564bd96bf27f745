package etcd

// Reads returns how many queue reads e issued while waiting.
func Reads(e *Elector) int64 { return e.reads.Load() }
