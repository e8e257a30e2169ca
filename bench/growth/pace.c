/* The targets of bench/growth/run.sh: a program that does nothing but one
 * thing, printing its own pace every 250 ms ("NS" nanoseconds per
 * operation), so that a tool's overhead shows as the pace with it against
 * the pace before it.
 *   pace touch   touches new pages: 64 MiB mapped, written a byte a page,
 *                unmapped, again (an operation: one page)
 *   pace mmap    maps 64 KiB anonymous, writes its first byte and unmaps
 *                it (an operation: the three)
 *   pace getppid calls getppid (an operation: one system call that is not
 *                a memory one), for bench/growth/unrelated.sh; its pace is
 *                of the thread's CPU time, not the wall clock's, so that
 *                other work on a shared machine does not count (a line
 *                per 100 ms of it)
 * With PACE_CLOCK=cpu in the environment, every mode's pace is of the
 * thread's CPU time (a line per 100 ms of it): what a tool makes the
 * process itself do (the kernel's sampling and the eBPF program run in its
 * context), without the waits a machine shared with other work adds to
 * the wall clock's. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) {
	struct timespec ts;
	clock_gettime(clock_id, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
	int touch = argc > 1 && strcmp(argv[1], "touch") == 0;
	int ppid = argc > 1 && strcmp(argv[1], "getppid") == 0;
	const char *pc = getenv("PACE_CLOCK");
	if (ppid || (pc && strcmp(pc, "cpu") == 0))
		clock_id = CLOCK_THREAD_CPUTIME_ID;
	setvbuf(stdout, 0, _IOLBF, 0);
	double start = now();
	long ops = 0;
	for (;;) {
		if (ppid) {
			/* The raw call: glibc caches nothing for getppid, but
			 * say so. */
			for (int i = 0; i < 1000; i++)
				syscall(SYS_getppid);
			ops += 1000;
		} else if (touch) {
			size_t n = 64 << 20;
			char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			for (size_t i = 0; i < n; i += 4096) {
				p[i] = 1;
				ops++;
			}
			munmap(p, n);
		} else {
			char *p = mmap(0, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			p[0] = 1;
			munmap(p, 64 << 10);
			ops++;
		}
		double t = now();
		if (t - start >= (clock_id == CLOCK_THREAD_CPUTIME_ID ? 100e6 : 250e6)) {
			printf("%.1f\n", (t - start) / ops);
			start = t;
			ops = 0;
		}
	}
}
