package zk_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The backend imports no test rig and no tool package (internal/README.md),
// as the root module's TestShippedCodeImportsNoRig checks for the packages
// of that module: this one is a module of its own.
func TestShippedCodeImportsNoRig(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
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
