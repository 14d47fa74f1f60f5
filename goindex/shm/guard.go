package shm

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// A mapped file can lose its pages under a reader or writer: another
// process may truncate it (tmpfs cleanup, an operator, a second consumer),
// and the next access past the new end raises SIGBUS. Every access window
// of a file mapping runs with debug.SetPanicOnFault, so that fault becomes
// a panic of this goroutine (also inside goindex/replica's assembly row
// kernels, which run as Go functions), and a deferred guard turns a panic
// whose address lies inside the mapping into ErrFault, recorded as the
// mapping's (Faulted; Check reports it). Other panics go on. An in-memory
// image (NewMemory) cannot shrink and is not guarded.

// fault returns the ErrFault of panic value p when p is a memory fault at
// an address inside m's mapping, else nil.
func (m *mapping) fault(p any) error {
	re, ok := p.(runtime.Error)
	if !ok {
		return nil
	}
	a, ok := re.(interface{ Addr() uintptr })
	if !ok || a.Addr() < m.lo || a.Addr() >= m.hi {
		return nil
	}
	return fmt.Errorf("%w: %s: access at byte %d of %d: %v", ErrFault, m.path, a.Addr()-m.lo, m.hi-m.lo, re)
}

// recovered records the ErrFault of a recovered value p and returns it (nil
// for no panic), and panics again with any other value.
func (m *mapping) recovered(p any) error {
	if p == nil {
		return nil
	}
	e := m.fault(p)
	if e == nil {
		panic(p)
	}
	m.faulted.CompareAndSwap(nil, &e)
	return e
}

// guard ends a guarded access window of m: deferred as
//
//	defer m.guard(debug.SetPanicOnFault(true), &err)
//
// it restores the goroutine's setting and turns a fault inside the mapping
// into the mapping's fault and, when err is not nil, *err; the access is
// lost.
func (m *mapping) guard(old bool, err *error) {
	debug.SetPanicOnFault(old)
	if e := m.recovered(recover()); e != nil && err != nil {
		*err = e
	}
}

// Guard ends a window of accesses to r's mapping through its Table (a
// search): deferred as
//
//	if r.Guarded() { defer r.Guard(debug.SetPanicOnFault(true)) }
//
// it restores the goroutine's setting and turns a fault inside the mapping
// into the reader's fault (Faulted, Check), so the search returns whatever
// it had; any other panic goes on.
func (r *Reader) Guard(old bool) {
	debug.SetPanicOnFault(old)
	_ = r.m.recovered(recover())
}

// Guarded reports whether r's accesses need a fault guard: true for a file
// mapping, false for an in-memory image, which cannot shrink.
func (r *Reader) Guarded() bool { return !r.m.memory }

// Faulted returns the first access to r's mapping that faulted, or nil.
func (r *Reader) Faulted() error { return r.m.faultErr() }

// Faulted returns the first access to w's mapping that faulted, or nil.
func (w *Writer) Faulted() error { return w.m.faultErr() }

func (m *mapping) faultErr() error {
	if e := m.faulted.Load(); e != nil {
		return *e
	}
	return nil
}
