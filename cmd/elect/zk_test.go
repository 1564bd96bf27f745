//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electkit/election/internal/rig/zktest"
)

// elect run on ZooKeeper: kill -9 of the leader's elect stops its command
// before the next leader's command writes, and tokens never go back;
// elect leader and observe see the leader.
func TestRunOnZooKeeper(t *testing.T) {
	srv := zktest.Standalone(t)
	out := filepath.Join(t.TempDir(), "out")
	env := []string{"OUT=" + out}
	common := []string{"--backend", "zk", "--servers", srv.Addr, "--name", "/test/zk-run"}
	args := func(id string) []string {
		as := append(append([]string{"run"}, common...), "--id", id, "--ttl", "2s", "--")
		return append(as, writer(false)...)
	}
	leader := startElect(t, "elect leader (none)", nil, append([]string{"leader"}, common...)...)
	if code := leader.wait(t); code != 3 {
		t.Fatalf("elect leader with no candidate: exit %d, want 3; stderr:\n%s", code, leader.stderr.String())
	}
	a := startElect(t, "elect run a", env, args("a")...)
	waitFor(t, "a's command to write", func() bool { return len(readEntries(t, out)) > 0 })
	obs := startElect(t, "elect observe", nil, append([]string{"observe", "--json"}, common...)...)
	waitFor(t, "observe to print a", func() bool { return strings.Contains(obs.stdout.String(), `"a"`) })
	leader = startElect(t, "elect leader", nil, append([]string{"leader"}, common...)...)
	if code := leader.wait(t); code != 0 || !strings.Contains(leader.stdout.String(), "a") {
		t.Fatalf("elect leader: exit %d, output %q", code, leader.stdout.String())
	}
	b := startElect(t, "elect run b", env, args("b")...)
	conn := zktest.Conn(t, []string{srv.Addr}, 2*time.Second)
	waitFor(t, "b to campaign", func() bool {
		names, _, err := conn.Children("/test/zk-run")
		cands := 0
		for _, n := range names {
			if strings.HasPrefix(n, "_c_") && !strings.HasSuffix(n, "-lead") {
				cands++ // a candidate node (the others: the leader's _l and leadership node)
			}
		}
		return err == nil && cands == 2
	})
	first := readEntries(t, out)[0]
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	waitTakeover(t, out, first)
	checkMonotonic(t, readEntries(t, out))
	waitFor(t, "observe to print b", func() bool { return strings.Contains(obs.stdout.String(), `"b"`) })
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	if code := b.wait(t); code != 0 {
		t.Fatalf("elect run b after SIGTERM: exit %d", code)
	}
	_ = obs.cmd.Process.Signal(syscall.SIGTERM)
	obs.wait(t)
}
