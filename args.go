package election

import "context"

// checkArgs refuses a nil ctx or a nil Elector, which the functions of this
// package taking them would otherwise panic on later.
func checkArgs(ctx context.Context, e Elector) error {
	if ctx == nil {
		return &OptionError{Field: "ctx", Value: "nil", Reason: "must not be nil; pass context.Background() if there is none"}
	}
	if e == nil {
		return &OptionError{Field: "Elector", Value: "nil", Reason: "must not be nil"}
	}
	return nil
}
