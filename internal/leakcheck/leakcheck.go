// Package leakcheck fails a test binary whose tests leave goroutines
// running. It serves the root module's own tests, which cannot use
// electiontest.Main (goleak): a test dependency of the root module would
// enter the module graph of every program that imports the library. The
// check counts goroutines, so it suits packages whose tests start nothing
// that outlives them by design (no client library's background workers).
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// Patience is how long Main waits for goroutines still ending when the
// tests return (a Close that returned before its last goroutine did).
const Patience = 5 * time.Second

// Main runs m's tests; when they pass, it fails the binary if more
// goroutines run Patience later than ran before the first test, printing
// every goroutine's stack.
func Main(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if err := settle(before, Patience); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func settle(before int, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		n := runtime.NumGoroutine()
		if n <= before {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("leakcheck: %d goroutines left after the tests (%d before them):\n%s", n, before, buf)
		}
		time.Sleep(wait)
	}
}
