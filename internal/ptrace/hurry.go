package ptrace

import "golang.org/x/sys/unix"

// Every PTRACE_INTERRUPT and PTRACE_DETACH wakes the thread it names, and
// the kernel most often wakes it on the waker's CPU, where it preempts the
// tracer thread (it slept; the tracer has run). Asking 2,000 threads to
// stop, or letting them go, was then a context switch pair a thread: the
// loop of 2,000 PTRACE_DETACHs took 28-50 ms on a 2-CPU machine, with
// every thread not yet let go waiting. Run as a real-time thread for those
// loops only, the tracer is not preempted: the woken threads run on the
// other CPUs, or after it. The same loop took 5-8 ms, and the longest
// stop a thread of a 2,000-thread process saw (bench/scale/threads.sh, six
// rounds) went from a median of 73 to 51 ms (docs/scale.md). Nothing else
// runs at that priority: the wait for the stops, the clone and the reads
// run as arenactl always does.

// hurryFrom is the fewest threads a loop hurries for: below it the two
// system calls cost more than they save.
const hurryFrom = 32

// hurry makes the calling thread (the tracer thread) SCHED_FIFO at the
// lowest real-time priority, and returns what puts its scheduling back as
// it was. Where that is refused (no CAP_SYS_NICE, a container whose cgroup
// has no real-time budget) nothing changes. The kernel's real-time
// throttling (sched_rt_runtime_us) still leaves other tasks their share
// of the CPU, and the loops it is used for are bounded by the number of
// threads.
func hurry(n int) (restore func()) {
	if n < hurryFrom {
		return func() {}
	}
	was, err := unix.SchedGetAttr(0, 0)
	if err != nil || was.Policy != unix.SCHED_NORMAL {
		return func() {}
	}
	if unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0) != nil {
		return func() {}
	}
	return func() { _ = unix.SchedSetAttr(0, was, 0) }
}
