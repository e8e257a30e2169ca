// Package implant owns the memory arenactl places in a live target, above
// the mechanism that runs code there (internal/ptrace: a stopped thread,
// its call site, Call and RawSyscall): mapping, protecting and unmapping
// memory from a stopped thread by raw syscalls (no code of the program's
// runs), and the one judgement of the call sites earlier runs left behind
// (which may be removed, which are kept and why). The call site itself is
// ptrace's (its routine is assembled against its layout, and it must exist
// before any syscall can be issued through it); what a placed object means
// is its owner's: glibc's injected calls keep their journal in the site,
// the sampler (internal/sampler) its hooks in its own mapping. Who made a
// leftover, and whether that arenactl still runs, is procfs.Identity.
package implant
