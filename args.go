package election

import "context"

// checkArgs refuses a nil ctx or a nil Elector, which the functions of this
// package taking them would otherwise panic on later.
func checkArgs(ctx context.Context, e Elector) error {
	if ctx == nil {
		return &OptionError{Field: "ctx", Value: "nil", Reason: "must not be nil; use context.Background() or a ctx with a deadline"}
	}
	if e == nil {
		return &OptionError{Field: "Elector", Value: "nil", Reason: "must not be nil"}
	}
	return nil
}
