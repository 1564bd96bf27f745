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

// awaitNextNoted waits until the leader e's watch has seen the reservation
// after its leadership key: from then on its release wakes the candidate
// behind the one that reserved (a release just after the reservation, before
// the watch's event, does not).
func awaitNextNoted(t *testing.T, e *etcd.Elector) {
	t.Helper()
	for deadline := time.Now().Add(patience); !probe.EtcdNextNoted(e); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader's watch never reported the reservation after it")
		}
	}
}
