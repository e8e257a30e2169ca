// Package ptrace owns everything arenactl does to a live process through the
// kernel: attaching to single threads, stopping and resuming them, saving and
// restoring their registers, reading and writing memory, and running code
// inside the target from its call site: a function (Call), a raw syscall
// (RawSyscall), a copy-on-write image of the process (CloneImage), and the
// holding of a low-level lock while arenactl reads what it guards
// (HoldLock), all small routines assembled here. The call site they run
// from is here too, with its one layout (header, saved registers, the
// journal a caller keeps, FindSites for a later run's view of it), since
// the routines are assembled against it. Other memory placed in a target,
// and the judgement of which leftover sites may go, are internal/implant's.
// It knows nothing about malloc: which locks and which calls are glibc's
// business.
//
// Every ptrace request is issued from one locked OS thread, because the kernel
// ties a tracee to the thread that attached to it.
package ptrace
