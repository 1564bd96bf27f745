package nemesis

import (
	"testing"
	"time"
)

// TestMonoOfNeverEarly: a time.Time converted with MonoOf is never before
// the Mono instant it stands for.
func TestMonoOfNeverEarly(t *testing.T) {
	for range 1000 {
		before := Mono()
		at := time.Now().Add(time.Second)
		got := MonoOf(at)
		if got < before+int64(time.Second) {
			t.Fatalf("MonoOf(now+1s) = %d, before Mono()+1s = %d", got, before+int64(time.Second))
		}
	}
}
