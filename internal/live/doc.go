// Package live is the live-process implementation of the target interfaces
// that internal/glibc reads through: memory and mappings from /proc, threads
// and function calls through internal/ptrace. It owns the one decision that
// needs both worlds: which thread to borrow for an injected call, found by
// asking glibc's HijackPolicy about threads that ptrace stopped one at a time.
package live
