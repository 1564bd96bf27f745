//go:build tools

// Package kubeapiserver pins the kube-apiserver that the kube backend's
// real-server tests start: `go build k8s.io/kubernetes/cmd/kube-apiserver`
// in this directory builds it.
package kubeapiserver

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
