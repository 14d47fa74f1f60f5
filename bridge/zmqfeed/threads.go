package zmqfeed

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Each publisher's socket waits in a libzmq poll, a cgo call that holds an
// OS thread for its whole wait, so a plane runs one thread per publisher.
// A process that cannot create a thread dies (the Go runtime's "failed to
// create new OS thread", or past its own limit of 10,000 threads), so a
// plane subscribes no more publishers than the threads the process may
// still create; the rest wait, and are retried, as past the socket limit.
const (
	// goMaxThreads is the Go runtime's default thread limit
	// (runtime/debug.SetMaxThreads).
	goMaxThreads = 10000
	// threadReserve is kept for everything else the process runs: the
	// runtime's own threads, NATS, the relay's writers, cgo calls.
	threadReserve = 512
)

// publisherBudget is how many publishers a plane may subscribe given the
// process's thread limits: Go's, the RLIMIT_NPROC soft limit (nproc; 0:
// unlimited) and one pids cgroup's pids.max less pids.current (their
// files' contents; "" when absent, "max" when unlimited). It is never
// below 1; why names the limit that set it ("" when Go's did).
func publisherBudget(nproc uint64, pidsMax, pidsCurrent string) (n int, why string) {
	limit, why := uint64(goMaxThreads), ""
	if nproc > 0 && nproc < limit {
		limit, why = nproc, "RLIMIT_NPROC "+strconv.FormatUint(nproc, 10)
	}
	if max, err := strconv.ParseUint(strings.TrimSpace(pidsMax), 10, 64); err == nil {
		cur, _ := strconv.ParseUint(strings.TrimSpace(pidsCurrent), 10, 64)
		if left := max - min(cur, max); left < limit {
			limit, why = left, fmt.Sprintf("pids.max %d, pids.current %d", max, cur)
		}
	}
	if limit <= threadReserve {
		return 1, why
	}
	return int(limit - threadReserve), why
}

// pidsDirs lists the pids cgroup directories whose limits apply to a
// process whose /proc/self/cgroup reads cgroup: its cgroup v2 group
// ("0::/path") and its cgroup v1 pids group ("N:pids:/path") with their
// ancestors, under /sys/fs/cgroup, and the mount roots, which a container
// sees as its own group. A limit anywhere on the path applies.
func pidsDirs(cgroup string) []string {
	var dirs []string
	for _, line := range strings.Split(cgroup, "\n") {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		root := ""
		switch {
		case parts[0] == "0" && parts[1] == "":
			root = "/sys/fs/cgroup"
		case slices.Contains(strings.Split(parts[1], ","), "pids"):
			root = "/sys/fs/cgroup/pids"
		default:
			continue
		}
		for path := strings.TrimRight(parts[2], "/"); strings.HasPrefix(path, "/"); {
			dirs = append(dirs, root+path)
			path = path[:strings.LastIndexByte(path, '/')]
		}
	}
	return append(dirs, "/sys/fs/cgroup", "/sys/fs/cgroup/pids")
}
