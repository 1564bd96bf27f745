package main

import (
	"strings"
	"testing"
)

func TestNemesisRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "consul"}, "--backend=consul"},
		{[]string{"--backend", "inmem", "--faults", "kill"}, `"kill" is not a fault of inmem`},
		{[]string{"--backend", "etcd", "--faults", "pause,nap"}, `"nap" is not a fault of etcd`},
		{[]string{"--duration", "0s"}, "--duration=0s"},
		{[]string{"--candidates", "1"}, "--candidates=1"},
		{[]string{"--ttl", "10ms"}, "--ttl=10ms"},
	} {
		code, _, errOut := elect(t, append([]string{"nemesis"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("elect nemesis %v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}

func TestNemesisInmemRun(t *testing.T) {
	code, out, errOut := elect(t, "nemesis", "--backend", "inmem", "--seed", "3", "--duration", "3s", "--out", t.TempDir())
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"backend inmem, seed 3", "faults injected", "linearizable", "P3 valid terms", "worst failover"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
}

func TestNemesisCandidateIsHidden(t *testing.T) {
	_, out, _ := elect(t, "--help")
	if !strings.Contains(out, "nemesis") || strings.Contains(out, candidateCommand) {
		t.Errorf("help should list nemesis and not %s:\n%s", candidateCommand, out)
	}
}
