package zmqfeed

import (
	"os"

	"golang.org/x/sys/unix"
)

// processPublisherBudget is the least publisherBudget over this process's
// RLIMIT_NPROC (which the kernel does not apply to root) and every pids
// cgroup on its path.
func processPublisherBudget() (int, string) {
	var nproc uint64
	var rl unix.Rlimit
	if os.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		nproc = rl.Cur
	}
	n, why := publisherBudget(nproc, "", "")
	cgroup, _ := os.ReadFile("/proc/self/cgroup")
	for _, dir := range pidsDirs(string(cgroup)) {
		max, err := os.ReadFile(dir + "/pids.max")
		if err != nil {
			continue
		}
		cur, _ := os.ReadFile(dir + "/pids.current")
		if m, w := publisherBudget(nproc, string(max), string(cur)); m < n {
			n, why = m, w+" ("+dir+")"
		}
	}
	return n, why
}
