//go:build unix && !linux

package main

import "syscall"

// childProcAttr: without a parent-death signal, elect kills the group when
// the guard dies.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// groupAlive reports whether group pgid still has a process (zombies
// included: there is no portable way to tell them apart).
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
