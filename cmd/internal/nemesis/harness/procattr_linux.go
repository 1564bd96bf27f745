package harness

import "syscall"

// procAttr makes a candidate die with the harness, however the harness
// ends: the kernel sends it SIGKILL when its parent goes.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
