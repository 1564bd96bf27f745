package lograte

import (
	"testing"
	"time"
)

func TestAllow(t *testing.T) {
	var l Limiter
	t0 := time.Unix(1000, 0)
	every := 5 * time.Second
	if n, ok := l.Allow(t0, every); !ok || n != 0 {
		t.Fatalf("first line: %d, %v; want 0, true", n, ok)
	}
	for i := 1; i <= 3; i++ {
		if _, ok := l.Allow(t0.Add(time.Duration(i)*time.Second), every); ok {
			t.Fatalf("line %d within the interval admitted", i)
		}
	}
	if n, ok := l.Allow(t0.Add(every), every); !ok || n != 3 {
		t.Fatalf("line after the interval: %d, %v; want 3, true", n, ok)
	}
	if n, ok := l.Allow(t0.Add(2*every), every); !ok || n != 0 {
		t.Fatalf("next line: %d, %v; want 0, true", n, ok)
	}
}
