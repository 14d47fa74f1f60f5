//go:build !linux

package demo

import "syscall"

// childProcAttr puts a child in its own process group; without Linux's
// parent-death signal a child outlives a demo killed with SIGKILL.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
