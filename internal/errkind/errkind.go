// Package errkind owns the kinds of failure arenactl tells apart: one
// sentinel error per condition that decides what is done about a failure
// (an exit code, a hint, the exporter's reason label). The packages that
// meet a condition keep describing it with their own typed errors (with the
// PID, address or file) and make them match their kind through errors.Is,
// as cilium/ebpf's errors match ebpf.ErrNotSupported; callers ask for the
// kind, never for the concrete type. What to do about a kind is not said
// here: exit codes and hints are cmd/arenactl's, and the reason labels the
// exporter's.
//
// It imports nothing of arenactl, so that every package can use it.
package errkind

import "errors"

var (
	// ErrInterrupted: a signal to arenactl (a cancelled context) ended the
	// work; what was held of the target was given back first.
	ErrInterrupted = errors.New("interrupted")

	// ErrNoProcess: the process or thread does not exist (any more).
	ErrNoProcess = errors.New("no such process")
	// ErrGone: the process exited, was killed or replaced its program
	// while arenactl worked on it.
	ErrGone = errors.New("target exited")
	// ErrPermission: the kernel refused to let arenactl read or trace the
	// process.
	ErrPermission = errors.New("permission denied")
	// ErrTraced: another tracer (a debugger, or another arenactl that
	// samples it) holds the process.
	ErrTraced = errors.New("held by another tracer")
	// ErrState: the process is in a state where it cannot be examined (a
	// zombie, a kernel thread).
	ErrState = errors.New("in a state that cannot be examined")

	// ErrArch: the process is a 32-bit program, or one of a machine
	// arenactl does not read or was not built for.
	ErrArch = errors.New("an architecture arenactl does not read")

	// ErrNotGlibc: the process does not allocate with glibc's malloc, or
	// glibc's malloc cannot be called in it.
	ErrNotGlibc = errors.New("not glibc malloc")
	// ErrNoCalls: a finer ErrNotGlibc: the heap is glibc malloc's, but
	// nothing may be called in it (a static executable, or
	// libc_malloc_debug.so wrapping it); it can still be read.
	ErrNoCalls = errors.New("glibc malloc that arenactl calls nothing in")

	// ErrNoSafeThread: no thread could be borrowed safely in time.
	ErrNoSafeThread = errors.New("no thread safe to borrow")
	// ErrCallFailed: a call injected into the target failed, faulted or
	// was abandoned; the thread was restored.
	ErrCallFailed = errors.New("injected call failed")
	// ErrTimeout: something waited for the target longer than allowed.
	ErrTimeout = errors.New("timed out")
	// ErrArenaUnchecked: an arena that looked damaged could not be walked
	// again in the time its lock may be held; nothing was injected.
	ErrArenaUnchecked = errors.New("arena could not be checked in time")
	// ErrDamaged: the heap is damaged where glibc would abort or hang;
	// nothing was injected.
	ErrDamaged = errors.New("heap damaged")
	// ErrLockedStop: an arena lock is held while threads are stopped, so
	// an injected call could wait forever; nothing was injected.
	ErrLockedStop = errors.New("arena locked while threads are stopped")

	// ErrNoImage: no copy-on-write image of the process can be made
	// safely; none was made.
	ErrNoImage = errors.New("no copy-on-write image")
	// ErrImageGone: the copy-on-write image ended before it was read (it
	// was killed, or its lease ran out while arenactl was stopped).
	ErrImageGone = errors.New("the copy-on-write image ended before it was read")

	// ErrNoSampler: the process cannot be sampled safely; nothing was
	// placed in it.
	ErrNoSampler = errors.New("cannot be sampled safely")
	// ErrNoPerf: perf events are not allowed or not available.
	ErrNoPerf = errors.New("perf events unavailable")
	// ErrPerfNotAllowed: a finer ErrNoPerf: the kernel refused perf
	// events for this process (perf_event_paranoid, no CAP_PERFMON, a
	// container's seccomp profile).
	ErrPerfNotAllowed = errors.New("perf events not allowed")
	// ErrNoTracefs: a finer ErrNoPerf: tracefs, where the syscall
	// tracepoints are named, is not mounted and could not be mounted.
	ErrNoTracefs = errors.New("no tracefs")
	// ErrResources: a limit of the system or of arenactl's process ran
	// out (open files, locked memory).
	ErrResources = errors.New("out of a system resource")

	// ErrNoMemory: a walk or scan would need more memory than arenactl
	// was allowed or the machine (or its cgroup) can spare; nothing was
	// done to the target.
	ErrNoMemory = errors.New("not enough memory for the walk")

	// ErrBadCore: the file is not a usable core of a machine arenactl reads.
	ErrBadCore = errors.New("not a usable core")
	// ErrCoreTooLarge: a compressed core unpacks past the limit set.
	ErrCoreTooLarge = errors.New("core unpacks past the limit")
	// ErrNoSpace: the temporary directory has no room for an unpacked
	// core.
	ErrNoSpace = errors.New("no room to unpack the core")
	// ErrMemoryOnly: a core's allocator could not be found from its memory
	// alone, and no libc file was there to read it with.
	ErrMemoryOnly = errors.New("no libc file to read the core with")
	// ErrBadRecording: the file is not a recording arenactl record
	// wrote, or of a later format.
	ErrBadRecording = errors.New("not a usable recording")
)
