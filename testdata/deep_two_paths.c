/* Two outer paths to the same deep frames: each of two worker threads
 * switches, every round of about 20 ms, between outer_a and outer_b,
 * whose frames are the same size, so that the 32 frames of descend (1 KiB
 * each) below them sit at the same depths and the same return addresses
 * whichever path called them. At the bottom, path A allocates in alloc_a
 * and touches fresh pages in touch_a, then sleeps (a thread blocked
 * there is read whole); path B does the same in alloc_b and touch_b
 * without sleeping (it is never seen blocked). Every sample is taken
 * 32 KiB or more below the outer frame, beyond any stack copy: a stack
 * joined or completed with the wrong outer frame (alloc_a under outer_b)
 * is a frame invented, and the tests count them.
 * descend keeps its path in its frame, as a real program's frames hold
 * the objects they work on. It prints "ready" once every worker has
 * started, and exits when stdin closes or says "quit". Built -O2
 * -fomit-frame-pointer by the tests, so the stacks unwind only with CFI. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 2
#define DEPTH 32
#define RING 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int started;
static void *ring[WORKERS][RING];

/* Not tail calls, and not alike: each is a frame of its own. */
__attribute__((noinline)) static void *alloc_a(size_t sz) {
	char *p = malloc(sz);
	if (p)
		p[0] = 'a';
	return p;
}
__attribute__((noinline)) static void *alloc_b(size_t sz) {
	char *p = malloc(sz);
	if (p)
		p[0] = 'b';
	return p;
}

__attribute__((noinline)) static void touch_a(char *p, size_t n) {
	for (size_t i = 0; i < n; i += 4096) p[i] = 1;
}
__attribute__((noinline)) static void touch_b(char *p, size_t n) {
	for (size_t i = 0; i < n; i += 4096) p[i] = 2;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One round of about 20 ms on path (0: A, 1: B). */
__attribute__((noinline)) static void work(int w, int path, unsigned *seed) {
	double end = now() + 0.02;
	unsigned n = 0;
	while (now() < end) {
		for (int i = 0; i < 8; i++) {
			*seed = *seed * 1103515245 + 12345;
			size_t sz = 64 + (*seed >> 8) % 8128;
			void **slot = &ring[w][(*seed >> 4) % RING];
			free(*slot);
			*slot = path ? alloc_b(sz) : alloc_a(sz);
			memset(*slot, 1, sz);
			n++;
		}
		char *p = mmap(0, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED) {
			if (path)
				touch_b(p, 64 << 10);
			else
				touch_a(p, 64 << 10);
			munmap(p, 64 << 10);
		}
		if (!path) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, 0);
		}
	}
}

/* A frame of 1 KiB that the call below cannot be a tail call from. */
__attribute__((noinline)) static int descend(int depth, int w, int path, unsigned *seed) {
	volatile char pad[1024];
	pad[0] = (char)depth;
	pad[1] = (char)path;
	if (depth == 0)
		work(w, path, seed);
	else
		descend(depth - 1, w, path, seed);
	return pad[0] + pad[depth % sizeof pad];
}

/* The two outer paths: frames of the same size, one call each. */
__attribute__((noinline)) static int outer_a(int w, unsigned *seed) {
	volatile char pad[256];
	pad[0] = 'a';
	descend(DEPTH, w, 0, seed);
	return pad[0];
}
__attribute__((noinline)) static int outer_b(int w, unsigned *seed) {
	volatile char pad[256];
	pad[0] = 'b';
	descend(DEPTH, w, 1, seed);
	return pad[0];
}

static void *worker(void *arg) {
	int w = (int)(unsigned long)arg;
	unsigned seed = w + 1;
	pthread_mutex_lock(&mu);
	started++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (unsigned round = 0;; round++) {
		if ((round + w) % 2)
			outer_b(w, &seed);
		else
			outer_a(w, &seed);
	}
	return 0;
}

int main(void) {
	pthread_t th[WORKERS];
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&th[i], 0, worker, (void *)(unsigned long)i);
	pthread_mutex_lock(&mu);
	while (started < WORKERS)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin) && strncmp(line, "quit", 4) != 0)
		;
	return 0;
}
