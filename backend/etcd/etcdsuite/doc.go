// Package etcdsuite holds backend/etcd's tests against real etcd servers,
// embedded in process (single members and 3-member clusters on loopback,
// faults through TCP proxies): the conformance suite, faults, operators'
// changes, sessions, transfer, priority and a scale smoke.
//
// It is a module of its own, so that the etcd server stays out of
// backend/etcd's module graph: a program that imports backend/etcd pulls
// in what etcd's client does, and little more. The module runs twice, once
// per supported etcd release line: go.mod pins the newest (v3.7), and
// go.v36.mod the previous (v3.6), used with
//
//	GOWORK=off go test -modfile=go.v36.mod ./...
//
// (make test does both).
package etcdsuite
