package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubeFlags: --backend kube reads --kubeconfig, names the Lease after
// --name, and refuses what the API server would, naming the flag. No
// request is sent: the kubeconfig's server is never reached.
func TestKubeFlags(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: team-a}}]
current-context: x
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--backend", "kube", "--kubeconfig", kc, "--name", "/Services/demo", "--", "true"}, `--name=/Services/demo: is the Lease Services.demo on --backend kube`},
		{[]string{"run", "--backend", "kube", "--kubeconfig", kc, "--namespace", "Team_A", "--name", "/services/demo", "--", "true"}, "--namespace=Team_A:"},
		{[]string{"run", "--backend", "kube", "--kubeconfig", kc, "--ttl", "1500ms", "--name", "/services/demo", "--", "true"}, "--ttl=1.5s: must be a whole number of seconds"},
		{[]string{"run", "--backend", "kube", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--name", "/services/demo", "--", "true"}, "--kubeconfig="},
		{[]string{"run", "--backend", "etcd", "--kubeconfig", kc, "--name", "/services/demo", "--", "true"}, "--kubeconfig=" + kc + ": only for --backend kube"},
	} {
		code, _, errOut := elect(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("elect %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}

func TestLeaseName(t *testing.T) {
	for in, want := range map[string]string{"/services/demo": "services.demo", "/a": "a", "/x/y/z": "x.y.z"} {
		if got := leaseName(in); got != want {
			t.Errorf("leaseName(%q) = %q, want %q", in, got, want)
		}
	}
}
