package demo

import "syscall"

// childProcAttr puts a child in its own process group and has the kernel
// kill it if the demo dies without stopping it (SIGKILL, a crash).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
