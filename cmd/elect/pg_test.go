//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/electkit/election/internal/rig/pgtest"
)

// elect run on PostgreSQL: kill -9 of the leader's elect stops its command
// before the next leader's command writes, and tokens never go back;
// elect leader and observe see the leader.
func TestRunOnPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	out := filepath.Join(t.TempDir(), "out")
	env := []string{"OUT=" + out}
	common := []string{"--backend", "postgres", "--dsn", srv.DSN("", ""), "--name", "/test/pg-run"}
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
	waitFor(t, "b to campaign", func() bool {
		n, err := srv.PSQL("SELECT count(*) FROM election.candidates WHERE name = '/test/pg-run' AND id = 'b'")
		return err == nil && n == "1"
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
