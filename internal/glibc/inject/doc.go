// Package inject owns the policy of calls into a live process's glibc:
// which stopped thread may run allocator code (HijackPolicy: what it is
// blocked in, what its stack holds, which locks it may hold), the calls
// themselves (malloc_info through open_memstream, malloc_trim) made
// through a Caller, and their journal, through which a later run removes
// what a killed one left. The thread is borrowed by internal/live and
// the call site placed by internal/ptrace and internal/implant; what the
// heap is and where its structures are is internal/glibc's.
package inject
