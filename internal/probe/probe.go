// Package probe lets the real-server tests, which live in another module
// of this repository (backend/etcd/etcdsuite: the etcd server they embed
// stays out of the library's module graph), read counters of an Elector
// that its API does not show. A backend sets its functions in an init;
// nothing else calls them.
package probe

// Set by backend/etcd; each takes an *etcd.Elector.
var (
	// EtcdReads returns how many queue reads the Elector issued while
	// waiting.
	EtcdReads func(e any) int64
	// EtcdClocks returns how many Terms' clocks the Elector still keeps
	// for Close to wait on.
	EtcdClocks func(e any) int
	// EtcdSettled reports whether the Elector's candidacy waits on a live
	// watch, or leads with its watch live: it issues no read until its
	// watch fires.
	EtcdSettled func(e any) bool
	// EtcdNextNoted reports whether the Elector leads and knows its
	// successor, the candidate its release hands over to (or, of an
	// earlier version, a reservation after its leadership key).
	EtcdNextNoted func(e any) bool
)
