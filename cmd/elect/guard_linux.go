package main

import "syscall"

// childProcAttr makes the kernel kill the command if the guard dies: the
// guard's main goroutine, which starts it, is locked to its thread.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
