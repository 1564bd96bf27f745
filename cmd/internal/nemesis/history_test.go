package nemesis

import (
	"testing"
	"time"

	"github.com/electkit/election/internal/mono"
)

// TestMonoOfNeverEarly: a time.Time converted with MonoOf is never before
// the Mono instant it stands for.
func TestMonoOfNeverEarly(t *testing.T) {
	for range 1000 {
		before := mono.Now()
		at := time.Now().Add(time.Second)
		got := mono.Of(at)
		if got < before+int64(time.Second) {
			t.Fatalf("mono.Of(now+1s) = %d, before mono.Now()+1s = %d", got, before+int64(time.Second))
		}
	}
}
