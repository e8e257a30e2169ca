/* The heap profiler's worst case: one thread doing nothing but malloc and
 * free (sizes 16 to 271 bytes). Every PERIOD ms it prints the mean ns per
 * malloc+free pair over that period on stdout: "ns 45.3". */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	double period = (argc > 1 ? atoi(argv[1]) : 250) / 1000.0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	unsigned s = 1;
	for (;;) {
		double t0 = now();
		long n = 0;
		do {
			for (int i = 0; i < 4096; i++) {
				s = s * 1103515245u + 12345u;
				void *p = malloc(16 + (s >> 24));
				__asm__ volatile("" : : "r"(p) : "memory");
				free(p);
			}
			n += 4096;
		} while (now() - t0 < period);
		printf("ns %.1f\n", (now() - t0) * 1e9 / n);
	}
}
