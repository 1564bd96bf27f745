// Package inmemsuite runs the conformance suite (package electiontest) on
// every algorithm of backend/inmem, in fake time, and its wall-clock jump
// test. It is a module of its own, so that the suite's goroutine-leak
// checker stays out of the module graph of programs that use the library.
package inmemsuite
