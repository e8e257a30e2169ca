/* A target for the tcache accounting test: every thread, the main one
 * included, frees a known number of chunks of a few known sizes into its own
 * tcache, then parks. Nothing else it does afterwards allocates or frees, so
 * each tcache holds exactly what this program put there.
 *
 * Thread i (0 is the main thread, 1..N the workers) mallocs and then frees
 *   i+1 blocks of 40 bytes   (chunk size 48),
 *   i+2 blocks of 200 bytes  (chunk size 208),
 *   N+1-i blocks of 1000 bytes (chunk size 1008),
 * at most 7 of a size: the smallest tcache capacity (mp_.tcache_count is 7
 * up to 2.42 and 16 from 2.43), so no free spills into a bin. Each worker's
 * first malloc creates an arena of its own (fewer threads than arena_test,
 * no arena on the free list), and its tcache is carved from that arena.
 *
 * Usage: tcache [N]   (default 4 workers)
 * It prints one line, "ready TID:SIZExCOUNT,... ..." with the main thread
 * first, then waits for "quit" (or EOF) on stdin and exits 0. Output goes
 * through write(2) from a static buffer and input through read(2), so stdio
 * allocates nothing in the main thread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXT 16
#define NSIZES 3

static const size_t req[NSIZES] = {40, 200, 1000};
static int nworkers = 4;
static pid_t tids[MAXT + 1];
static pthread_barrier_t done;

/* Pointers go through a volatile array so that gcc cannot drop a
 * malloc/free pair whose result is otherwise unused. */
static void *volatile held[MAXT + 1][32];

static int count(int i, int s) {
	switch (s) {
	case 0: return i + 1;
	case 1: return i + 2;
	default: return nworkers + 1 - i;
	}
}

static void fill_tcache(int i) {
	int n = 0;
	for (int s = 0; s < NSIZES; s++)
		for (int k = 0; k < count(i, s); k++) {
			held[i][n] = malloc(req[s]);
			if (!held[i][n]) abort();
			n++;
		}
	for (int k = 0; k < n; k++) free(held[i][k]);
	tids[i] = (pid_t)syscall(SYS_gettid);
}

static void *worker(void *arg) {
	int i = (int)(long)arg;
	fill_tcache(i);
	pthread_barrier_wait(&done);
	for (;;) {
		struct timespec ts = {3600, 0};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static size_t chunk(size_t n) {
	size_t c = (n + 8 + 15) & ~(size_t)15;
	return c < 32 ? 32 : c;
}

int main(int argc, char **argv) {
	if (argc > 1) nworkers = atoi(argv[1]);
	if (nworkers < 1 || nworkers > MAXT || nworkers + 1 + 2 > 7) {
		static const char msg[] = "tcache: 1 to 4 workers (counts must stay within 7)\n";
		if (write(2, msg, sizeof msg - 1) < 0) {}
		return 2;
	}
	pthread_barrier_init(&done, NULL, nworkers + 1);
	/* The main thread fills its tcache before any thread exists: creating
	 * a thread allocates its TLS from the main arena, and none of that is
	 * freed while the workers live. */
	fill_tcache(0);
	for (int i = 1; i <= nworkers; i++) {
		pthread_t th;
		if (pthread_create(&th, NULL, worker, (void *)(long)i)) return 2;
	}
	pthread_barrier_wait(&done);

	static char line[4096];
	size_t n = 0;
	n += snprintf(line + n, sizeof line - n, "ready");
	for (int i = 0; i <= nworkers; i++) {
		n += snprintf(line + n, sizeof line - n, " %d:", (int)tids[i]);
		for (int s = 0; s < NSIZES; s++)
			n += snprintf(line + n, sizeof line - n, "%s%zux%d", s ? "," : "", chunk(req[s]), count(i, s));
	}
	n += snprintf(line + n, sizeof line - n, "\n");
	if (write(1, line, n) != (ssize_t)n) return 2;

	static char in[256];
	ssize_t r;
	while ((r = read(0, in, sizeof in - 1)) > 0) {
		in[r] = 0;
		if (strstr(in, "quit")) break;
	}
	static const char bye[] = "bye\n";
	if (write(1, bye, sizeof bye - 1) < 0) {}
	_exit(0);
}
