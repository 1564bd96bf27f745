//go:build unix && !linux

package main

import "syscall"

// childProcAttr: without a parent-death signal, elect kills the group when
// the guard dies.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
