// Package kubesuite holds backend/kube's tests against a real
// kube-apiserver: the conformance suite, client-go's leaderelection
// candidates on the same Lease, and other clients of the API server
// (deletes and edits of the Lease, RBAC, restarts), and the elect command
// on --backend kube. The server is the kube-apiserver of
// k8s.io/kubernetes, built from source by the module in kubeapiserver/
// and started as a child process on loopback against an etcd embedded in
// the test process (internal/rig/kubetest's Server, which the benchmark
// harness uses too).
//
// It is a module of its own, outside the workspace (run its tests with
// GOWORK=off), so that the test rig stays out of backend/kube's module
// graph; kubeapiserver/ is another, so that k8s.io/kubernetes, which asks
// for its own versions of much of the Go ecosystem, stays out of both.
// The tests run the binary named by the environment variable
// KUBE_APISERVER (make test builds it), or build it themselves.
package kubesuite
