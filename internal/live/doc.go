// Package live is the live-process implementation of target.Target: memory
// and mappings from /proc, threads and function calls through
// internal/ptrace. What only a live process can do is here too: stop every
// thread (Freeze) and borrow one to run code in (Hijack). It owns the one decision that
// needs both worlds: which thread to borrow for an injected call, found by
// asking glibc's HijackPolicy about threads that ptrace stopped one at a time.
// For internal/implant it issues raw syscalls in a stopped thread
// (FrozenCaller, Session), says which thread runs in a leftover call site,
// and unmaps the leftover sites glibc's injected calls emptied.
package live
