package etcdsuite_test

import (
	"testing"
	"time"

	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/probe"
)

// probeReads returns how many queue reads es issued while waiting, in all.
func probeReads(es ...*etcd.Elector) (sum int64) {
	for _, e := range es {
		sum += probe.EtcdReads(e)
	}
	return sum
}

// probeClocks returns how many Terms' clocks e still keeps for Close.
func probeClocks(e *etcd.Elector) int { return probe.EtcdClocks(e) }

// probeSettled reports whether e waits or leads on a live watch.
func probeSettled(e *etcd.Elector) bool { return probe.EtcdSettled(e) }

// awaitSettled waits until e waits or leads on a live watch.
func awaitSettled(t *testing.T, e *etcd.Elector, id string) {
	t.Helper()
	for deadline := time.Now().Add(patience); !probeSettled(e); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never settled on a watch", id)
		}
	}
}

// awaitNextNoted waits until the leader e knows its successor, the
// candidate just below it (its release hands over to that one; a release
// before it knows deletes its keys alone, and the head claims).
func awaitNextNoted(t *testing.T, e *etcd.Elector) {
	t.Helper()
	for deadline := time.Now().Add(patience); !probe.EtcdNextNoted(e); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader never knew its successor")
		}
	}
}
