//go:build !linux

package harness

import "syscall"

// procAttr: without a parent-death signal, candidates end when the harness
// stops them.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
