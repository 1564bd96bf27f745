package election

import (
	"context"
	"fmt"
	"reflect"
)

// checkArgs refuses a nil ctx or a nil Elector — an untyped nil, or a nil
// pointer of a backend's type (a *etcd.Elector never made, say) — which
// the functions of this package taking them would otherwise panic on
// later.
func checkArgs(ctx context.Context, e Elector) error {
	if ctx == nil {
		return &OptionError{Field: "ctx", Value: "nil", Reason: "must not be nil; pass context.Background() if there is none"}
	}
	if e == nil {
		return &OptionError{Field: "Elector", Value: "nil", Reason: "must not be nil"}
	}
	if v := reflect.ValueOf(e); v.Kind() == reflect.Pointer && v.IsNil() {
		return &OptionError{Field: "Elector", Value: fmt.Sprintf("(%T)(nil)", e), Reason: "must not be nil: a nil pointer of a backend's Elector type (was New's error checked?)"}
	}
	return nil
}
