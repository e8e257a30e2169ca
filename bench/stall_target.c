/* A stand-in for a server: worker threads that allocate and free all the
 * time, each recording the longest gap between two consecutive iterations of
 * its own loop. A tool that stops a worker (gdb stops them all) shows up as
 * a gap as long as the stop; a tool that leaves the workers alone shows up
 * only through what its call does to them (malloc_info takes each arena's
 * lock in turn while it walks that arena).
 *
 *   stall_target [WORKERS [PAUSE_US [pin]]]
 *
 * WORKERS (default 8) threads each lay out a fragmented heap in an arena of
 * their own, then loop: free one of their live blocks and allocate another
 * of a random size, a few times, then read CLOCK_MONOTONIC. With PAUSE_US
 * > 0 every iteration ends with a sleep that long, like a request thread
 * that waits for its next request; with 0 the workers never stop running.
 * "pin" keeps the main thread on CPU 0 and spreads the workers over the
 * other CPUs, for a run where the tool (pinned to CPU 0 too) never competes
 * with a worker for its CPU.
 *
 * The main thread parks in read(2) on stdin, reading commands, one a line.
 * Answers go to fd 3 when it is open, else to fd 1, always with write(2):
 * stdout is left to whoever injects a malloc_info(0, stdout) (gdb's recipe),
 * so its XML cannot get mixed into the answers.
 *   reset   forget every gap seen so far; answers "ok" once every worker
 *           has started measuring afresh
 *   gaps    waits until every worker has finished two more iterations (so
 *           a gap still in progress is counted), then answers
 *           "gaps MAX W0 W1 ... why VCSW IVCSW": the longest gap and each
 *           worker's, in nanoseconds, then the voluntary and involuntary
 *           context switches of the iteration that made the longest gap
 *           (blocked on a lock or in a syscall, or preempted)
 *   info    runs malloc_info() itself, from the main thread, into /dev/null:
 *           what the call alone costs the workers, with no tool involved;
 *           answers "ok NS", how long the call took
 *   quit    answers "bye" and exits
 * "ready WORKERS" is printed once the heap is laid out and the workers run. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define LIVE 512    /* blocks each worker keeps live in its loop */
#define LAYOUT 20000 /* blocks allocated at start, every other one freed */
#define PER_ITER 4  /* free+malloc pairs per iteration */

struct worker {
	pthread_t th;
	int idx;
	void *live[LIVE];
	void *layout[LAYOUT / 2];
	_Atomic uint64_t max_gap;  /* ns */
	_Atomic uint64_t iters;
	_Atomic unsigned seen_gen; /* the reset generation it measures for */
	_Atomic long max_vcsw, max_ivcsw; /* context switches of that iteration */
	char pad[64];
};

static int nworkers = 8;
static long pause_us;
static int pin;
static struct worker *workers;
static _Atomic unsigned gen;
static pthread_barrier_t laid_out;
static int out_fd = 1;

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned rnd(unsigned *s) { *s = *s * 1103515245u + 12345u; return *s >> 8; }

/* Small to medium sizes, now and then a large one: fastbins, tcache, small
 * and large bins all see traffic. */
static size_t rnd_size(unsigned *s) {
	unsigned r = rnd(s);
	if (r % 64 == 0) return 4096 + r % 60000;
	return 16 + r % 1024;
}

static void *xmalloc(size_t n) {
	void *p = malloc(n);
	if (!p) abort();
	((volatile char *)p)[0] = 1; /* touch it */
	return p;
}

static void pin_to(int cpu) {
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static void *work(void *arg) {
	struct worker *w = arg;
	if (pin) pin_to(1 + w->idx % (pin - 1));
	unsigned seed = 7919u * (unsigned)(w->idx + 1);
	/* Fragment this thread's arena: allocate many blocks of mixed sizes,
	 * keep every other one. */
	void **tmp = xmalloc(LAYOUT * sizeof *tmp);
	for (int i = 0; i < LAYOUT; i++) tmp[i] = xmalloc(rnd_size(&seed));
	for (int i = 0; i < LAYOUT; i++) {
		if (i % 2) free(tmp[i]);
		else w->layout[i / 2] = tmp[i];
	}
	free(tmp);
	for (int i = 0; i < LIVE; i++) w->live[i] = xmalloc(rnd_size(&seed));
	pthread_barrier_wait(&laid_out);

	/* Not a generation main can have made yet: the first iteration
	 * acknowledges whichever is current, even a reset that came before
	 * this thread got to run. */
	unsigned mygen = UINT_MAX;
	uint64_t last = now_ns();
	struct timespec pause = {pause_us / 1000000, (pause_us % 1000000) * 1000};
	struct rusage before, after;
	getrusage(RUSAGE_THREAD, &before);
	for (;;) {
		for (int k = 0; k < PER_ITER; k++) {
			unsigned i = rnd(&seed) % LIVE;
			free(w->live[i]);
			w->live[i] = xmalloc(rnd_size(&seed));
		}
		if (pause_us > 0) nanosleep(&pause, NULL);
		uint64_t t = now_ns();
		unsigned g = atomic_load_explicit(&gen, memory_order_acquire);
		if (g != mygen) {
			/* A reset: the gap that spans it belongs to no one. */
			mygen = g;
			atomic_store(&w->max_gap, 0);
			atomic_store_explicit(&w->seen_gen, g, memory_order_release);
		} else if (t - last > atomic_load_explicit(&w->max_gap, memory_order_relaxed)) {
			atomic_store_explicit(&w->max_gap, t - last, memory_order_relaxed);
			getrusage(RUSAGE_THREAD, &after);
			atomic_store_explicit(&w->max_vcsw, after.ru_nvcsw - before.ru_nvcsw, memory_order_relaxed);
			atomic_store_explicit(&w->max_ivcsw, after.ru_nivcsw - before.ru_nivcsw, memory_order_relaxed);
		}
		last = t;
		getrusage(RUSAGE_THREAD, &before);
		atomic_fetch_add_explicit(&w->iters, 1, memory_order_release);
	}
	return NULL;
}

static void say(const char *fmt, ...) {
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof buf) abort();
	for (int off = 0; off < n;) {
		ssize_t k = write(out_fd, buf + off, (size_t)(n - off));
		if (k < 0 && errno == EINTR) continue;
		if (k <= 0) exit(1);
		off += (int)k;
	}
}

static void tiny_sleep(void) {
	struct timespec ts = {0, 200000};
	nanosleep(&ts, NULL);
}

static void reset(void) {
	unsigned g = atomic_fetch_add(&gen, 1) + 1;
	for (int i = 0; i < nworkers; i++)
		while (atomic_load_explicit(&workers[i].seen_gen, memory_order_acquire) != g) tiny_sleep();
	say("ok\n");
}

static void gaps(void) {
	uint64_t *start = xmalloc(nworkers * sizeof *start);
	for (int i = 0; i < nworkers; i++) start[i] = atomic_load(&workers[i].iters);
	for (int i = 0; i < nworkers; i++)
		while (atomic_load_explicit(&workers[i].iters, memory_order_acquire) < start[i] + 2) tiny_sleep();
	free(start);
	uint64_t max = 0;
	long vcsw = 0, ivcsw = 0;
	char list[4096];
	int off = 0;
	for (int i = 0; i < nworkers; i++) {
		uint64_t g = atomic_load(&workers[i].max_gap);
		if (g > max) {
			max = g;
			vcsw = atomic_load(&workers[i].max_vcsw);
			ivcsw = atomic_load(&workers[i].max_ivcsw);
		}
		off += snprintf(list + off, sizeof list - (size_t)off, " %llu", (unsigned long long)g);
		if (off >= (int)sizeof list) abort();
	}
	say("gaps %llu%s why %ld %ld\n", (unsigned long long)max, list, vcsw, ivcsw);
}

static void self_info(void) {
	static FILE *devnull;
	if (!devnull && !(devnull = fopen("/dev/null", "w"))) abort();
	uint64_t start = now_ns();
	if (malloc_info(0, devnull) != 0) abort();
	fflush(devnull);
	say("ok %llu\n", (unsigned long long)(now_ns() - start));
}

int main(int argc, char **argv) {
	if (argc > 1) nworkers = atoi(argv[1]);
	if (argc > 2) pause_us = atol(argv[2]);
	if (argc > 3 && !strcmp(argv[3], "pin")) pin = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (nworkers < 1 || nworkers > 256 || pause_us < 0 || (argc > 3 && pin < 2)) {
		fprintf(stderr, "usage: %s [WORKERS (1-256) [PAUSE_US [pin]]] (pin needs 2 CPUs or more)\n", argv[0]);
		return 2;
	}
	if (pin) pin_to(0);
	if (fcntl(3, F_GETFD) != -1) out_fd = 3;
	/* Some fragmentation in main_arena too. */
	unsigned seed = 1;
	void *keep[2000];
	for (int i = 0; i < 4000; i++) {
		void *p = xmalloc(rnd_size(&seed));
		if (i % 2) free(p);
		else keep[i / 2] = p;
	}
	(void)keep;

	workers = aligned_alloc(64, sizeof *workers * (size_t)nworkers);
	if (!workers) abort();
	memset(workers, 0, sizeof *workers * (size_t)nworkers);
	pthread_barrier_init(&laid_out, NULL, (unsigned)nworkers + 1);
	for (int i = 0; i < nworkers; i++) {
		workers[i].idx = i;
		if (pthread_create(&workers[i].th, NULL, work, &workers[i])) abort();
	}
	pthread_barrier_wait(&laid_out);
	say("ready %d\n", nworkers);

	char line[256];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(0, line + len, sizeof line - 1 - len);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) return 0; /* stdin closed: the script is gone */
		len += (size_t)n;
		char *nl;
		while ((nl = memchr(line, '\n', len))) {
			*nl = 0;
			if (!strcmp(line, "reset")) reset();
			else if (!strcmp(line, "gaps")) gaps();
			else if (!strcmp(line, "info")) self_info();
			else if (!strcmp(line, "quit")) {
				say("bye\n");
				_exit(0);
			} else say("unknown command %s\n", line);
			len -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, len);
		}
		if (len == sizeof line - 1) len = 0; /* an absurd line: drop it */
	}
}
