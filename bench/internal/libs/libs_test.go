package libs

import (
	"errors"
	"strings"
	"testing"
)

func TestMissingNamesEveryAbsentPeer(t *testing.T) {
	es := builtin()
	miss := strings.Join(Missing(es), "\n")
	for _, n := range []string{ClientGoName, CuratorName} {
		if !strings.Contains(miss, n) {
			t.Errorf("Missing does not name %s: %q", n, miss)
		}
	}
	if strings.Contains(miss, ConcurrencyName) {
		t.Errorf("Missing names the built-in %s: %q", ConcurrencyName, miss)
	}
	es = append(es, Entry{Name: CuratorName, Store: ZK, Role: Peer, Available: func() error { return errors.New("no JVM") }})
	if miss := strings.Join(Missing(es), "\n"); !strings.Contains(miss, "cannot run here: no JVM") {
		t.Errorf("an unavailable peer is not reported: %q", miss)
	}
	if n := len(Runnable(es)); n != len(builtin()) {
		t.Errorf("Runnable kept %d entries, want %d", n, len(builtin()))
	}
}

func TestFilter(t *testing.T) {
	got := Filter(All(), " ETCD ,nothing")
	if len(got) == 0 {
		t.Fatal("no entry matched etcd")
	}
	for _, e := range got {
		if !strings.Contains(strings.ToLower(e.Name), "etcd") {
			t.Errorf("%s kept", e.Name)
		}
	}
	if len(Filter(All(), "")) != len(All()) {
		t.Error("an empty filter drops entries")
	}
}
