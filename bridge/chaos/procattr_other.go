//go:build !linux

package chaos

import "syscall"

// procAttr gives a child its own process group; without Linux's
// parent-death signal a child outlives a driver killed with SIGKILL.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
