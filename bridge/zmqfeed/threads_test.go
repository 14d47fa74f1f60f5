package zmqfeed

import (
	"slices"
	"testing"
)

func TestPublisherBudget_TheTightestThreadLimitLessAReserve(t *testing.T) {
	for _, c := range []struct {
		name             string
		nproc            uint64
		pidsMax, pidsCur string
		want             int
		wantWhy          string
	}{
		{"no limit but Go's", 0, "", "", goMaxThreads - threadReserve, ""},
		{"unlimited cgroup", 0, "max\n", "40\n", goMaxThreads - threadReserve, ""},
		{"RLIMIT_NPROC", 4096, "", "", 4096 - threadReserve, "RLIMIT_NPROC 4096"},
		{"RLIMIT_NPROC above Go's", 1 << 20, "", "", goMaxThreads - threadReserve, ""},
		{"pids cgroup, what is left of it", 0, "1024\n", "100\n", 1024 - 100 - threadReserve, "pids.max 1024, pids.current 100"},
		{"the cgroup under RLIMIT_NPROC", 4096, "2048", "48", 2048 - 48 - threadReserve, "pids.max 2048, pids.current 48"},
		{"RLIMIT_NPROC under the cgroup", 1000, "4096", "10", 1000 - threadReserve, "RLIMIT_NPROC 1000"},
		{"nothing left: one", 0, "600", "500", 1, "pids.max 600, pids.current 500"},
		{"more used than the limit: one", 0, "600", "900", 1, "pids.max 600, pids.current 900"},
		{"unreadable current counts as 0", 0, "2000", "", 2000 - threadReserve, "pids.max 2000, pids.current 0"},
	} {
		n, why := publisherBudget(c.nproc, c.pidsMax, c.pidsCur)
		if n != c.want || why != c.wantWhy {
			t.Errorf("%s: publisherBudget(%d, %q, %q) = %d, %q; want %d, %q", c.name, c.nproc, c.pidsMax, c.pidsCur, n, why, c.want, c.wantWhy)
		}
	}
}

func TestPidsDirs_TheProcessGroupsAndTheirAncestors(t *testing.T) {
	v2 := "0::/kubepods/pod1/ctr\n"
	want := []string{"/sys/fs/cgroup/kubepods/pod1/ctr", "/sys/fs/cgroup/kubepods/pod1", "/sys/fs/cgroup/kubepods",
		"/sys/fs/cgroup", "/sys/fs/cgroup/pids"}
	if got := pidsDirs(v2); !slices.Equal(got, want) {
		t.Errorf("pidsDirs(v2) = %q, want %q", got, want)
	}
	v1 := "12:memory:/docker/abc\n8:pids:/docker/abc\n1:name=systemd:/docker/abc\n"
	want = []string{"/sys/fs/cgroup/pids/docker/abc", "/sys/fs/cgroup/pids/docker", "/sys/fs/cgroup", "/sys/fs/cgroup/pids"}
	if got := pidsDirs(v1); !slices.Equal(got, want) {
		t.Errorf("pidsDirs(v1) = %q, want %q", got, want)
	}
	for _, junk := range []string{"", "0::/\n", "0::relative\n", "garbage", "3:cpu,pids:\n"} {
		if got := pidsDirs(junk); !slices.Equal(got, []string{"/sys/fs/cgroup", "/sys/fs/cgroup/pids"}) {
			t.Errorf("pidsDirs(%q) = %q, want the mount roots only", junk, got)
		}
	}
	if n, _ := processPublisherBudget(); n < 1 || n > goMaxThreads-threadReserve {
		t.Errorf("this process's budget = %d, want 1 … %d", n, goMaxThreads-threadReserve)
	}
}
