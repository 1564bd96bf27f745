// Package termbridge lets package backend build Terms whose fields stay
// unexported in the root package. The root package sets the variables when
// it is initialised; package backend imports the root package, so they are
// set before any of its code runs. The root package imports nothing that
// imports it back.
package termbridge

import "time"

// Clock is the root package's lease clock of one Term: what
// backend.LeaseClock forwards to.
type Clock interface {
	BeforeRenew() error
	Renewed(sent time.Time, err error) time.Time
	RenewedAt(sent, replied time.Time, err error) time.Time
	End(cause error) bool
	Wait()
	AwaitHooks(d time.Duration) bool
}

// NewTerm holds the root package's Term constructor, a
//
//	func(election.Options, election.Leader, time.Time) (*election.Term, Clock)
//
// (held as any: this package cannot name the root package's types).
var NewTerm any

// ValidateID is the root package's check of a candidate ID.
var ValidateID func(id string) error
