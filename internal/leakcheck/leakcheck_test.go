package leakcheck

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestSettleWaitsForEndingGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	done := make(chan struct{})
	go func() { time.Sleep(20 * time.Millisecond); close(done) }()
	if err := settle(before, 5*time.Second); err != nil {
		t.Fatalf("settle with a goroutine that ends: %v", err)
	}
	<-done
}

func TestSettleReportsALeftGoroutine(t *testing.T) {
	// The goroutine that ran the test before this one may still be ending:
	// count once no goroutine has ended for a while.
	before := runtime.NumGoroutine()
	for settle(before-1, 50*time.Millisecond) == nil {
		before = runtime.NumGoroutine()
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { <-stop }()
	err := settle(before, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "goroutines left") || !strings.Contains(err.Error(), "TestSettleReportsALeftGoroutine") {
		t.Fatalf("settle with a blocked goroutine = %v; want an error with its stack", err)
	}
}
