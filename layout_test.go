package election_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Shipped code (the root package and the backends) imports no test rig
// and no tool package (internal/README.md): what a user's program compiles
// stays lean.
func TestShippedCodeImportsNoRig(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./backend/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var shipped int
	for _, p := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(p, "github.com/electkit/election/internal/")
		if !ok {
			continue
		}
		shipped++
		for _, banned := range []string{"rig/", "nemesis", "mono"} {
			if strings.HasPrefix(rest, banned) {
				t.Errorf("shipped code imports %s", p)
			}
		}
	}
	if shipped == 0 {
		t.Error("go list found no internal package: the check looks at nothing")
	}
}
