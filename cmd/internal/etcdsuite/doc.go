// Package etcdsuite holds backend/etcd's tests against real etcd servers,
// embedded in process (single members and 3-member clusters on loopback,
// faults through TCP proxies). They live in the cmd module, beside the
// rigs, so that the etcd server stays out of the library's module graph:
// a program that imports backend/etcd pulls in what etcd's client does,
// and little more.
package etcdsuite
