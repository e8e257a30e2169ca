/* The heap profiler's worst case: threads doing nothing but malloc and
 * free (sizes 16 to 271 bytes). Every PERIOD ms it prints the mean ns per
 * malloc+free pair per thread over that period on stdout: "ns 45.3"
 * (with several threads: the time each took per pair, averaged).
 *
 * usage: loop [PERIOD_MS [THREADS]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile long pairs[256 * 8]; /* per thread, a cache line apart */

static void *spin(void *arg) {
	long id = (long)arg;
	unsigned s = 1 + (unsigned)id;
	for (;;) {
		for (int i = 0; i < 4096; i++) {
			s = s * 1103515245u + 12345u;
			void *p = malloc(16 + (s >> 24));
			__asm__ volatile("" : : "r"(p) : "memory");
			free(p);
		}
		__atomic_add_fetch(&pairs[id * 8], 4096, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(int argc, char **argv) {
	double period = (argc > 1 ? atoi(argv[1]) : 250) / 1000.0;
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	if (threads < 1) threads = 1;
	if (threads > 256) threads = 256;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (threads > 1) {
		for (long i = 0; i < threads; i++) {
			pthread_t t;
			pthread_create(&t, NULL, spin, (void *)i);
		}
		printf("ready\n");
		long last = 0;
		for (;;) {
			double t0 = now();
			struct timespec ts = {0, (long)(period * 1e9)};
			nanosleep(&ts, NULL);
			long n = 0;
			for (int i = 0; i < threads; i++) n += __atomic_load_n(&pairs[i * 8], __ATOMIC_RELAXED);
			/* Thread-seconds over pairs: each thread's own time per pair
			 * when the threads share the CPUs evenly. */
			printf("ns %.1f\n", (now() - t0) * threads * 1e9 / (double)(n - last));
			last = n;
		}
	}
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
