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
 *   busy N  start N churn threads (once; 1-64) that replace the kept
 *           blocks without pause: over and over, each frees a kept block
 *           of any thread at random (it coalesces with the free chunks
 *           beside it, which leave their bins) and puts a new block of a
 *           random size in its place. With M_ARENA_MAX at THREADS they
 *           share the fragmented arenas, so their requests are served from
 *           the bins the heap was built with: a heap rewritten while it is
 *           read, as a loaded server's is. Answers "ok"
 *   pause   the churn threads stop between two replacements (answers "ok"
 *           once all have); resume lets them go on (answers "ok")
 *   churned answers "churned N", the replacements made so far
 *   fork    the main thread forks once, the child exits at once, and the
 *           parent reaps it: what a plain fork costs the other threads;
 *           answers "ok"
 *   info P  the main thread calls malloc_info itself and writes it to the
 *           file P (with the churn paused, glibc's own report to compare a
 *           tool's with), through a fmemopen stream with no buffer, as
 *           arenactl's injected call does: the stream's FILE and cookie go
 *           to the thread's tcache after, and arenactl's stream takes them
 *           back from there, so both calls see the same heap; answers "ok"
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
#include <sys/wait.h>
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

/* kept[i][j]: thread i's kept blocks, for the churn to replace. */
static void ***kept;

static void build(int idx) {
	unsigned seed = 7919u * (unsigned)(idx + 1);
	size_t n = (size_t)pairs;
	kept[idx] = scratch(n * sizeof **kept);
	void **victims = scratch(n * sizeof *victims);
	unsigned short *vsize = scratch(n * sizeof *vsize);
	uint64_t bytes = 0, freed = 0;
	size_t large = 0;
	for (size_t i = 0; i < n; i++) {
		size_t a = 16 + rnd(&seed) % (unsigned)(maxreq - 15);
		size_t b = 16 + rnd(&seed) % (unsigned)(maxreq - 15);
		victims[i] = xmalloc(a);
		vsize[i] = (unsigned short)a;
		kept[idx][i] = xmalloc(b); /* the neighbour that stops coalescing */
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

static _Atomic int churn_pause, churn_paused;
static _Atomic uint64_t churned;
static int churners;

/* Churn thread c replaces the kept blocks whose index is c modulo the
 * number of churn threads: no two touch the same one. */
static void *churner(void *arg) {
	size_t c = (size_t)(intptr_t)arg;
	unsigned seed = 104729u * (unsigned)(c + 1);
	unsigned span = (unsigned)(maxreq - 15);
	size_t per = ((size_t)pairs - c + (size_t)churners - 1) / (size_t)churners;
	struct timespec ms = {0, 1000000};
	for (;;) {
		if (atomic_load(&churn_pause)) {
			atomic_fetch_add(&churn_paused, 1);
			while (atomic_load(&churn_pause)) nanosleep(&ms, NULL);
			atomic_fetch_sub(&churn_paused, 1);
		}
		for (int k = 0; k < 64; k++) {
			void **slot = &kept[rnd(&seed) % (unsigned)nthreads][c + (rnd(&seed) % per) * (size_t)churners];
			free(*slot);
			*slot = xmalloc(16 + rnd(&seed) % span);
		}
		atomic_fetch_add(&churned, 64);
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
		/* 512-516 are the kernel's own restart codes, which only a
		 * debugger that failed to put the thread back lets through: gdb 13
		 * cannot write back the extended state of a CPU with AMX ("Couldn't
		 * write extended state status") after its call. Reading again
		 * keeps the target usable for the next round. */
		if (k < 0 && (errno == EINTR || (errno >= 512 && errno <= 516))) continue;
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
	kept = scratch((size_t)nthreads * sizeof *kept);
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
		} else if (strncmp(line, "busy ", 5) == 0) {
			int n = atoi(line + 5);
			if (!churners && n >= 1 && n <= 64 && n <= pairs) {
				churners = n;
				for (int i = 0; i < n; i++) {
					pthread_t th;
					if (pthread_create(&th, NULL, churner, (void *)(intptr_t)i) != 0) abort();
				}
			}
			put("ok\n");
		} else if (strcmp(line, "pause") == 0) {
			struct timespec ms = {0, 1000000};
			atomic_store(&churn_pause, 1);
			while (atomic_load(&churn_paused) < churners) nanosleep(&ms, NULL);
			put("ok\n");
		} else if (strcmp(line, "resume") == 0) {
			atomic_store(&churn_pause, 0);
			put("ok\n");
		} else if (strcmp(line, "churned") == 0) {
			snprintf(buf, sizeof buf, "churned %llu\n", (unsigned long long)atomic_load(&churned));
			put(buf);
		} else if (strcmp(line, "fork") == 0) {
			pid_t child = fork();
			if (child == 0) _exit(0);
			if (child > 0) waitpid(child, NULL, 0);
			put(child > 0 ? "ok\n" : "fork failed\n");
		} else if (strncmp(line, "info ", 5) == 0) {
			size_t size = 16 << 20;
			char *xml = scratch(size);
			FILE *fp = fmemopen(xml, size, "w");
			if (!fp) abort();
			setvbuf(fp, NULL, _IONBF, 0);
			malloc_info(0, fp);
			fclose(fp);
			int fd = open(line + 5, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			size_t len = strlen(xml);
			int ok = fd >= 0 && write(fd, xml, len) == (ssize_t)len;
			if (fd >= 0) close(fd);
			munmap(xml, size);
			put(ok ? "ok\n" : "cannot write\n");
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
