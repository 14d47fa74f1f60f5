// Package gohost loads libgoindex.so into a Go program with purego and
// checks its C ABI (host_test.go). Two Go runtimes then share one process:
// the library's runtime installs its own SIGURG handler when it starts,
// and SIGURG is the signal the host's runtime preempts goroutines with, so
// Load saves the host's handler before the library's first call and puts it
// back after. Keep such a host short-lived, and never load the library into
// the goindex side-process.
package gohost

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Overlap is goindex_overlap.
type Overlap struct {
	ID     uint64
	Rank   uint32
	Blocks uint32
}

// Candidate is goindex_candidate.
type Candidate struct {
	ID                  uint64
	Rank                uint32
	Flags               uint32
	ActivePrefillTokens uint64
	ActiveDecodeBlocks  uint64
	CapacityBlocks      uint64
	RTTms               float64
}

// ScoreRequest is goindex_score_request.
type ScoreRequest struct {
	StructSize  uint32
	Policy      uint32
	LocalHashes *uint64
	NHashes     uintptr
	ISLTokens   uint64
	Candidates  *Candidate
	NCandidates uintptr
	Temperature float64
	RandomSeed  uint64
}

// ScoreResult is goindex_score_result as the version-1 headers before
// fail-open scoring had it (72 bytes, no flags): this host keeps checking
// that the library honours their contract.
type ScoreResult struct {
	StructSize   uint32
	Chosen       int32
	ID           uint64
	Rank         uint32
	Eligible     uint32
	CachedBlocks uint64
	CachedTokens uint64
	Cost         float64
	RTTms        float64
	QueueMs      float64
	PrefillMs    float64
}

// Counters is goindex_counters as the 104-byte headers before fail-open
// scoring had it (the library fills only what struct_size covers).
type Counters struct {
	StructSize uint32
	Mode       uint32
	Blocks, Members, LanesReady, MemoryBytes, CapacityOmissions,
	EventsApplied, EventsRejected, Probes, FramesApplied, FramesRejected, ReplicaGeneration uint64
	FramesIgnored uint64
}

// Lib holds the library's calls, with the header's argument lists.
// Strings travel as (*byte, length) pairs, never as purego strings, so
// that lengths and NULLs are the test's to choose.
type Lib struct {
	ABIVersion    func() uint32
	Open          func(cfg *byte, n uintptr, out *uint64) int32
	Close         func(h uint64) int32
	Insert        func(h, worker uint64, rank uint32, event uint64, parent, ext, locals *uint64, n uintptr) int32
	InsertTokens  func(h, worker uint64, rank uint32, event uint64, parent, ext *uint64, n uintptr, tokens *uint32, nTokens uintptr, lora *byte, loraLen uintptr, ns *byte, nsLen uintptr) int32
	Remove        func(h, worker uint64, rank uint32, event uint64, ext *uint64, n uintptr) int32
	Clear         func(h, worker uint64, rank uint32, event uint64) int32
	RemoveWorker  func(h, worker uint64) int32
	RemoveRank    func(h, worker uint64, rank uint32) int32
	HashTokens    func(h uint64, tokens *uint32, n uintptr, lora *byte, loraLen uintptr, ns *byte, nsLen uintptr, out *uint64, capacity uintptr, written *uintptr) int32
	Probe         func(h uint64, q *uint64, n uintptr, out *Overlap, capacity uintptr, written *uintptr) int32
	ProbeBatch    func(h uint64, q *uint64, lens *uintptr, nq uintptr, out *Overlap, capacity uintptr, counts, written *uintptr) int32
	Score         func(h uint64, req *ScoreRequest, res *ScoreResult) int32
	ApplyFrame    func(h uint64, frame *byte, n uintptr) int32
	AttachReplica func(h uint64, path *byte, n uintptr) int32
	SetRTT        func(h, dc uint64, rttMs float64) int32
	Stats         func(h uint64, c *Counters) int32
	Strerror      func(code int32) *byte
	LastError     func(h uint64, buf *byte, capacity uintptr, needed *uintptr) int32
}

// sigaction is the kernel's struct sigaction, kept opaque: it is only ever
// read from the kernel and written back unchanged (32 bytes covers every
// 64-bit Linux layout).
type sigaction [4]uint64

// sigURG returns the current SIGURG disposition, or installs act when non-nil.
func sigURG(act *sigaction) (sigaction, error) {
	var old sigaction
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGURG),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	if errno != 0 {
		return old, fmt.Errorf("rt_sigaction(SIGURG): %w", errno)
	}
	return old, nil
}

// Load opens the library at path and binds every call. It reports whether
// the library's runtime had replaced the host's SIGURG handler, which Load
// has put back.
func Load(path string) (lib *Lib, replaced bool, err error) {
	host, err := sigURG(nil)
	if err != nil {
		return nil, false, err
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, false, err
	}
	lib = new(Lib)
	for name, fn := range map[string]any{
		"goindex_abi_version": &lib.ABIVersion, "goindex_open": &lib.Open, "goindex_close": &lib.Close,
		"goindex_insert": &lib.Insert, "goindex_insert_tokens": &lib.InsertTokens, "goindex_remove": &lib.Remove,
		"goindex_clear": &lib.Clear, "goindex_remove_worker": &lib.RemoveWorker, "goindex_remove_rank": &lib.RemoveRank,
		"goindex_hash_tokens": &lib.HashTokens, "goindex_probe": &lib.Probe, "goindex_probe_batch": &lib.ProbeBatch,
		"goindex_score": &lib.Score, "goindex_apply_frame": &lib.ApplyFrame, "goindex_attach_replica": &lib.AttachReplica,
		"goindex_set_rtt": &lib.SetRTT,
		"goindex_stats":   &lib.Stats, "goindex_strerror": &lib.Strerror, "goindex_last_error": &lib.LastError,
	} {
		purego.RegisterLibFunc(fn, h, name)
	}
	// The library's runtime starts on its own thread during dlopen; its
	// first call waits for that start, so after it the handler is final.
	lib.ABIVersion()
	now, err := sigURG(&host)
	if err != nil {
		return nil, false, err
	}
	return lib, now != host, nil
}

// SIGURGHandler returns the raw current SIGURG disposition (for checks).
func SIGURGHandler() (uint64, error) {
	act, err := sigURG(nil)
	return act[0], err
}
