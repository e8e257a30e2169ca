/* A target whose allocating frames sit 32 KiB deep: each of three worker
 * threads descends through 32 frames of 1 KiB each (descend), then, at the
 * bottom, works in a loop: a few mallocs of 64 B to 8 KiB kept in a ring
 * of 256 (the oldest freed), a 64 KiB mmap touched page by page and
 * unmapped, then a sleep of 2 ms. Every sample of arenactl leaks or growth
 * is taken 32 KiB or more below the thread's first frame, beyond any stack
 * copy of 8 KiB: its outer frames are known only by joining.
 * It prints "ready" once every worker is at the bottom, and exits when
 * stdin closes or says "quit". Built -O2 -fomit-frame-pointer by the
 * tests, so the stacks unwind only with CFI. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3
#define DEPTH 32
#define RING 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int at_bottom;

__attribute__((noinline)) static void work(unsigned seed) {
	void *ring[RING] = {0};
	unsigned n = 0;
	pthread_mutex_lock(&mu);
	at_bottom++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (;;) {
		for (int i = 0; i < 8; i++) {
			seed = seed * 1103515245 + 12345;
			size_t sz = 64 + (seed >> 8) % 8128;
			free(ring[n % RING]);
			ring[n % RING] = malloc(sz);
			memset(ring[n % RING], 1, sz);
			n++;
		}
		char *p = mmap(0, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED) {
			for (size_t i = 0; i < 64 << 10; i += 4096) p[i] = 1;
			munmap(p, 64 << 10);
		}
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, 0);
	}
}

/* A frame of 1 KiB that the call below cannot be a tail call from. */
__attribute__((noinline)) static int descend(int depth, unsigned seed) {
	volatile char pad[1024];
	pad[0] = (char)depth;
	if (depth == 0)
		work(seed);
	else
		descend(depth - 1, seed);
	return pad[0] + pad[depth % sizeof pad];
}

static void *worker(void *arg) {
	descend(DEPTH, (unsigned)(unsigned long)arg);
	return 0;
}

int main(void) {
	pthread_t th[WORKERS];
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&th[i], 0, worker, (void *)(unsigned long)(i + 1));
	pthread_mutex_lock(&mu);
	while (at_bottom < WORKERS)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin) && strncmp(line, "quit", 4) != 0)
		;
	return 0;
}
