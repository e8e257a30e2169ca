/* A process with many threads, all parked in pause() after each allocated
 * a block from its arena: for checks of what arenactl does per thread.
 *
 *   many_threads N      (N threads besides the main one)
 *
 * It prints "ready" once every thread is parked, then answers on stdin:
 *   tick   starts a ticker thread (allocating nothing) that wakes every
 *          100 us and records the longest gap between two of its wake-ups
 *          (a tool that stops every thread shows as a gap that long);
 *          prints "ok"
 *   gaps   prints "gaps NS", the longest gap since the last "gaps" (or
 *          "tick"), once the ticker has woken twice more, and starts afresh
 *   quit   prints "clean" and exits */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_barrier_t started;

static void *worker(void *arg) {
	void *p = malloc(64 + (long)arg % 512);
	if (p == NULL)
		abort();
	memset(p, 1, 64);
	pthread_barrier_wait(&started);
	for (;;)
		pause();
	return NULL;
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static _Atomic uint64_t max_gap, wakeups;
static _Atomic int restart;

static void *ticker(void *arg) {
	(void)arg;
	struct timespec ts = {0, 100000};
	uint64_t last = now_ns();
	for (;;) {
		nanosleep(&ts, NULL);
		uint64_t t = now_ns();
		if (atomic_exchange(&restart, 0))
			atomic_store(&max_gap, 0);
		else if (t - last > atomic_load(&max_gap))
			atomic_store(&max_gap, t - last);
		last = t;
		atomic_fetch_add(&wakeups, 1);
	}
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 12;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	pthread_barrier_init(&started, NULL, n + 1);
	for (long i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, worker, (void *)i) != 0)
			abort();
	}
	pthread_barrier_wait(&started);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	int ticking = 0;
	while (fgets(line, sizeof line, stdin) != NULL) {
		if (strncmp(line, "quit", 4) == 0) {
			printf("clean\n");
			fflush(stdout);
			return 0;
		}
		if (strncmp(line, "tick", 4) == 0) {
			pthread_t t;
			if (!ticking && pthread_create(&t, NULL, ticker, NULL) != 0)
				abort();
			ticking = 1;
			printf("ok\n");
		} else if (strncmp(line, "gaps", 4) == 0 && ticking) {
			uint64_t w = atomic_load(&wakeups);
			struct timespec ms = {0, 1000000};
			while (atomic_load(&wakeups) < w + 2)
				nanosleep(&ms, NULL);
			printf("gaps %llu\n", (unsigned long long)atomic_load(&max_gap));
			atomic_store(&restart, 1);
		}
		fflush(stdout);
	}
	return 0;
}
