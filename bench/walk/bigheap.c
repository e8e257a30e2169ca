/* A large, fragmented glibc heap for benchmarking arenactl's read-only walker
 * and its cores: THREADS threads (the main thread in main_arena, the others
 * each in an arena of its own) each lay out PAIRS pairs of blocks, keep one
 * block of every pair and free the other, so that the freed chunks (far
 * beyond what the tcache holds) sit in the bins between kept neighbours and
 * never coalesce. Then every thread parks.
 *
 *   bigheap [THREADS [PAIRS [MAXREQ]]]
 *
 * Defaults: 16 threads, 131072 pairs, requests of 16 to 500 bytes (uniform):
 * about 1.1 GiB of heap in 16 arenas, 4.2 M chunks, 2.1 M of them free.
 * 16 320000 400 gives about 2.3 GiB and 10.2 M chunks.
 *
 * Per thread: allocate the pairs; free the blocks above the fastbin limit
 * (they land in the unsorted bin); sort them into the small and large bins
 * with a few 16 KiB requests (each sorts up to 10,000 unsorted chunks and,
 * since no free chunk fits, is carved from the top; they are kept); last,
 * free the small blocks (7 per size to the tcache, the rest to fastbins; no
 * malloc follows to consolidate them).
 *
 * The main thread then prints "ready THREADS PAIRS BYTES FREED" (BYTES: the
 * bytes requested by every block, FREED: how many were freed) and reads
 * commands on stdin, one a line. Answers go to fd 3 when it is open, else to
 * fd 1, always with write(2): stdout is left to whoever injects
 * malloc_info(0, stdout) (gdb's recipe).
 *   tick    start a ticker thread (allocating nothing) that wakes every
 *           100 us and records the longest gap between two of its wake-ups:
 *           a tool that stops every thread shows up as a gap that long;
 *           answers "ok"
 *   gaps    answers "gaps NS", the longest gap since the last "gaps" (or
 *           "tick"), once the ticker has woken twice more (so that a gap
 *           still in progress is counted), and starts afresh
 *   quit    answers "bye" and exits
 * EOF on stdin exits too. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define FAST_MAX_REQ 120 /* requests up to this are fastbin chunks (128 bytes) */
#define SORT_REQ 16384   /* a request no freed chunk can serve */

static int nthreads = 16;
static long pairs = 131072;
static long maxreq = 500;
static pthread_barrier_t built;
static _Atomic uint64_t total_bytes, total_freed;
static int out_fd = 1;

static unsigned rnd(unsigned *s) { *s = *s * 1103515245u + 12345u; return *s >> 8; }

static void *xmalloc(size_t n) {
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "bigheap: out of memory\n");
		abort();
	}
	((volatile char *)p)[0] = 1; /* touch it, as a program would */
	return p;
}

/* Scratch memory outside the heap, so that it leaves no hole there. */
static void *scratch(size_t n) {
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) abort();
	return p;
}

static void build(int idx) {
	unsigned seed = 7919u * (unsigned)(idx + 1);
	size_t n = (size_t)pairs;
	void **victims = scratch(n * sizeof *victims);
	unsigned short *vsize = scratch(n * sizeof *vsize);
	uint64_t bytes = 0, freed = 0;
	size_t large = 0;
	for (size_t i = 0; i < n; i++) {
		size_t a = 16 + rnd(&seed) % (unsigned)(maxreq - 15);
		size_t b = 16 + rnd(&seed) % (unsigned)(maxreq - 15);
		victims[i] = xmalloc(a);
		vsize[i] = (unsigned short)a;
		xmalloc(b); /* kept: the neighbour that stops coalescing */
		bytes += a + b;
	}
	for (size_t i = 0; i < n; i++)
		if (vsize[i] > FAST_MAX_REQ) {
			free(victims[i]);
			freed++;
			large++;
		}
	/* Sort the unsorted bin into the small and large bins: one request
	 * sorts at most 10,000 chunks (MAX_ITERS). */
	for (size_t k = 0; k <= large / 10000 + 1; k++) {
		xmalloc(SORT_REQ);
		bytes += SORT_REQ;
	}
	for (size_t i = 0; i < n; i++)
		if (vsize[i] <= FAST_MAX_REQ) {
			free(victims[i]);
			freed++;
		}
	munmap(victims, n * sizeof *victims);
	munmap(vsize, n * sizeof *vsize);
	atomic_fetch_add(&total_bytes, bytes);
	atomic_fetch_add(&total_freed, freed);
}

static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;

static void *worker(void *arg) {
	build((int)(intptr_t)arg);
	pthread_barrier_wait(&built);
	pthread_mutex_lock(&park_mu); /* park for good, in a futex wait */
	for (;;) pthread_cond_wait(&park_cv, &park_mu);
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

/* Answers one short line: a pipe or FIFO takes it whole (PIPE_BUF). */
static void put(const char *line) {
	ssize_t n = (ssize_t)strlen(line);
	if (write(out_fd, line, (size_t)n) != n) exit(1);
}

/* Reads one line from fd 0 with read(2), allocating nothing. */
static int readline(char *buf, size_t size) {
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t k = read(0, &c, 1);
		if (k < 0 && errno == EINTR) continue;
		if (k <= 0) return -1;
		if (c == '\n') break;
		if (n + 1 < size) buf[n++] = c;
	}
	buf[n] = 0;
	return 0;
}

int main(int argc, char **argv) {
	if (argc > 1) nthreads = atoi(argv[1]);
	if (argc > 2) pairs = atol(argv[2]);
	if (argc > 3) maxreq = atol(argv[3]);
	if (nthreads < 1 || nthreads > 1024 || pairs < 1 || maxreq <= FAST_MAX_REQ || maxreq > 60000) {
		fprintf(stderr, "usage: %s [THREADS (1-1024) [PAIRS [MAXREQ (%d-60000)]]]\n", argv[0], FAST_MAX_REQ + 1);
		return 2;
	}
	if (fcntl(3, F_GETFD) != -1) out_fd = 3;
	/* One arena per thread: the main thread's is main_arena. */
	mallopt(M_ARENA_MAX, nthreads);
	pthread_barrier_init(&built, NULL, (unsigned)nthreads);
	for (int i = 1; i < nthreads; i++) {
		pthread_t th;
		if (pthread_create(&th, NULL, worker, (void *)(intptr_t)i) != 0) abort();
	}
	build(0);
	pthread_barrier_wait(&built);
	char buf[160];
	snprintf(buf, sizeof buf, "ready %d %ld %llu %llu\n", nthreads, pairs, (unsigned long long)atomic_load(&total_bytes),
	         (unsigned long long)atomic_load(&total_freed));
	put(buf);

	pthread_t tick_th;
	int ticking = 0;
	char line[64];
	while (readline(line, sizeof line) == 0) {
		if (strcmp(line, "tick") == 0) {
			if (!ticking && pthread_create(&tick_th, NULL, ticker, NULL) != 0) abort();
			ticking = 1;
			atomic_store(&restart, 1);
			put("ok\n");
		} else if (strcmp(line, "gaps") == 0 && ticking) {
			uint64_t w = atomic_load(&wakeups);
			struct timespec ts = {0, 200000};
			while (atomic_load(&wakeups) < w + 2) nanosleep(&ts, NULL);
			snprintf(buf, sizeof buf, "gaps %llu\n", (unsigned long long)atomic_load(&max_gap));
			put(buf);
			atomic_store(&restart, 1);
		} else if (strcmp(line, "quit") == 0) {
			put("bye\n");
			return 0;
		} else {
			snprintf(buf, sizeof buf, "? %s\n", line);
			put(buf);
		}
	}
	return 0;
}
