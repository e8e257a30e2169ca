/* The targets of bench/growth/run.sh: a program that does nothing but one
 * thing, printing its own pace every 250 ms ("NS" nanoseconds per
 * operation), so that a tool's overhead shows as the pace with it against
 * the pace before it.
 *   pace touch   touches new pages: 64 MiB mapped, written a byte a page,
 *                unmapped, again (an operation: one page)
 *   pace mmap    maps 64 KiB anonymous, writes its first byte and unmaps
 *                it (an operation: the three) */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
	int touch = argc > 1 && strcmp(argv[1], "touch") == 0;
	setvbuf(stdout, 0, _IOLBF, 0);
	double start = now();
	long ops = 0;
	for (;;) {
		if (touch) {
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
		if (t - start >= 250e6) {
			printf("%.1f\n", (t - start) / ops);
			start = t;
			ops = 0;
		}
	}
}
