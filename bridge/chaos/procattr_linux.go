package chaos

import "syscall"

// procAttr gives a child its own process group (a terminal's Ctrl-C
// reaches only the driver) and has the kernel kill it when the driver dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
