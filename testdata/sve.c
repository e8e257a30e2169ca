/* An aarch64 target with a thread whose SVE state is live: it spins in
 * user code holding z8 = {1, 2, 3, ...} over the whole vector length and
 * p1 all true, checking both on every turn, so a tracer that gave it back
 * without its SVE state (a call through a frame with no SVE record) is
 * caught. The main thread reads commands on stdin:
 *   check   wait until the SVE thread made progress, print "ok" or "bad"
 *   quit    print "clean" (or "damaged") and exit 0 (3)
 * It prints "ready" once the thread runs. Built with -march=armv8-a+sve. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile long progress, bad;
static volatile int stopping;

static void *sve(void *arg) {
	(void)arg;
	while (!stopping) {
		uint64_t errs;
		__asm__ volatile(
		    "mov %[e], #0\n\t"
		    "ptrue p1.d\n\t"
		    "index z8.d, #1, #1\n\t"
		    "movz x9, #0x4240\n\t movk x9, #0xf, lsl #16\n\t"
		    "1:\n\t"
		    "index z9.d, #1, #1\n\t"
		    "cmpne p2.d, p1/z, z8.d, z9.d\n\t"
		    "b.none 2f\n\t"
		    "add %[e], %[e], #1\n\t"
		    "2:\n\t"
		    "cntp x10, p1, p1.d\n\t"
		    "cntd x11\n\t"
		    "cmp x10, x11\n\t"
		    "b.eq 3f\n\t"
		    "add %[e], %[e], #1\n\t"
		    "3:\n\t"
		    "subs x9, x9, #1\n\t"
		    "b.ne 1b\n\t"
		    : [e] "=&r"(errs)
		    :
		    : "x9", "x10", "x11", "z8", "z9", "p1", "p2", "cc");
		if (errs) bad++;
		progress++;
	}
	return NULL;
}

int main(void) {
	pthread_t th;
	pthread_create(&th, NULL, sve, NULL);
	while (progress == 0) usleep(1000);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "check", 5)) {
			long before = progress;
			while (progress <= before + 1) usleep(1000);
			printf(bad ? "bad %ld\n" : "ok\n", bad);
			fflush(stdout);
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
	}
	stopping = 1;
	pthread_join(th, NULL);
	printf(bad ? "damaged\n" : "clean\n");
	return bad ? 3 : 0;
}
