/* An aarch64 target with a thread that is in SME streaming mode with ZA
 * on (smstart) nearly all the time: it spins in user code reading SVCR
 * on every turn (SM and ZA must both stay set), leaving streaming mode
 * only to count its progress, so a tracer that gave it back without its
 * SME state (a call through a frame with no SME record) is caught. The
 * main thread reads commands on stdin:
 *   check   wait until the SME thread made progress, print "ok" or "bad"
 *   quit    print "clean" (or "damaged") and exit 0 (3)
 * It prints "ready" once the thread runs. The SME instructions are
 * written as their encodings (GCC 12 has no +sme). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile long progress, bad;
static volatile int stopping;

static void *sme(void *arg) {
	(void)arg;
	while (!stopping) {
		uint64_t errs;
		__asm__ volatile(
		    "mov %[e], #0\n\t"
		    ".inst 0xd503477f\n\t" /* smstart: PSTATE.SM and PSTATE.ZA */
		    "movz x9, #0x4240\n\t movk x9, #0xf, lsl #16\n\t"
		    "1:\n\t"
		    "mrs x10, S3_3_C4_C2_2\n\t" /* SVCR */
		    "and x10, x10, #3\n\t"
		    "cmp x10, #3\n\t"
		    "b.eq 2f\n\t"
		    "add %[e], %[e], #1\n\t"
		    "2:\n\t"
		    "subs x9, x9, #1\n\t"
		    "b.ne 1b\n\t"
		    ".inst 0xd503467f\n\t" /* smstop */
		    : [e] "=&r"(errs)
		    :
		    : "x9", "x10", "cc", "memory");
		if (errs) bad++;
		progress++;
	}
	return NULL;
}

int main(void) {
	pthread_t th;
	pthread_create(&th, NULL, sme, NULL);
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
