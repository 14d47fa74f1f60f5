package bench

import (
	"fmt"
	"runtime"
)

// Machine describes where a benchmark ran, so a recorded figure says what
// it measured: the CPU, the Go runtime and whether the kernel backs tables
// with huge pages.
type Machine struct {
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// CPUModel is the kernel's name for the CPU (linux: /proc/cpuinfo's
	// "model name"); empty where unknown.
	CPUModel string `json:"cpu_model,omitempty"`
	// HugePages is the transparent huge page policy for anonymous memory
	// (linux: always, madvise or never; empty elsewhere). With madvise,
	// replica.New's hint gets its table huge pages.
	HugePages string `json:"transparent_huge_pages,omitempty"`
	// ShmemHugePages is the same policy for shared memory such as
	// /dev/shm, where a router's replica file lives.
	ShmemHugePages string `json:"shmem_huge_pages,omitempty"`
}

// ReadMachine describes this machine.
func ReadMachine() Machine {
	m := Machine{Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	m.CPUModel, m.HugePages, m.ShmemHugePages = cpuModel(), hugePagePolicy(thpEnabled), hugePagePolicy(thpShmem)
	return m
}

// String is the machine in one line.
func (m Machine) String() string {
	s := fmt.Sprintf("%s %s/%s, %d CPUs (GOMAXPROCS %d)", m.Go, m.OS, m.Arch, m.CPUs, m.GOMAXPROCS)
	if m.CPUModel != "" {
		s += ", " + m.CPUModel
	}
	if m.HugePages != "" {
		s += fmt.Sprintf(", transparent huge pages %s (shmem %s)", m.HugePages, m.ShmemHugePages)
	}
	return s
}
