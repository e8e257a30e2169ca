/* A target that grows on command, for arenactl watch and diff. A worker
 * thread has an arena of its own (the first thread to allocate gets a new
 * one); the main thread allocates from main_arena. Blocks are 64 KiB, below
 * the mmap threshold, so they come from the arenas' heaps. Every block is
 * filled with a byte derived from its address and checked on "check" and
 * at exit, so damage done by a tracer shows in the exit status.
 *
 * Commands on stdin (one per line), answered on stdout:
 *   grow N    the worker allocates and fills N MiB more: "ok"
 *   main N    the main thread does the same in main_arena: "ok"
 *   check     verify every block: "ok" or "corrupt"
 *   quit      verify, free everything, exit: "clean" (0) or "corrupt" (3)
 * It prints "ready" once the worker has its arena and waits for work. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK (64 << 10)
#define MAXBLOCKS 32768

static void *blocks[MAXBLOCKS];
static int nblocks;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int request = -1; /* MiB the worker is asked for; 0 = stop */
static int done;

static unsigned char mark(void *p) { return (unsigned char)((uintptr_t)p >> 16) | 1; }

static int grow(int mib) {
	for (int i = 0; i < mib * (1 << 20) / BLOCK; i++) {
		if (nblocks == MAXBLOCKS) return -1;
		void *p = malloc(BLOCK);
		if (!p) return -1;
		memset(p, mark(p), BLOCK);
		blocks[nblocks++] = p;
	}
	return 0;
}

static int check(void) {
	for (int i = 0; i < nblocks; i++) {
		unsigned char *b = blocks[i], m = mark(b);
		for (int k = 0; k < BLOCK; k++)
			if (b[k] != m) return 0;
	}
	return 1;
}

static void *worker(void *arg) {
	(void)arg;
	void *volatile first = malloc(64); /* take an arena of its own now */
	free(first);
	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&cv);
	for (;;) {
		while (request < 0) pthread_cond_wait(&cv, &mu);
		if (request == 0) break;
		done = grow(request) ? -1 : 1;
		request = -1;
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* ask hands n to the worker (0 stops it) and waits for its answer. */
static int ask(int n) {
	pthread_mutex_lock(&mu);
	done = 0;
	request = n;
	pthread_cond_broadcast(&cv);
	while (n && !done) pthread_cond_wait(&cv, &mu);
	int rc = done;
	pthread_mutex_unlock(&mu);
	return rc;
}

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_t th;
	pthread_create(&th, NULL, worker, NULL);
	pthread_mutex_lock(&mu);
	while (!done) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	printf("ready\n");
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		int n;
		if (sscanf(line, "grow %d", &n) == 1 && n > 0) {
			printf(ask(n) == 1 ? "ok\n" : "error\n");
		} else if (sscanf(line, "main %d", &n) == 1 && n > 0) {
			printf(grow(n) ? "error\n" : "ok\n");
		} else if (!strncmp(line, "check", 5)) {
			printf(check() ? "ok\n" : "corrupt\n");
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
	}
	ask(0);
	pthread_join(th, NULL);
	int ok = check();
	for (int i = 0; i < nblocks; i++) free(blocks[i]);
	printf(ok ? "clean\n" : "corrupt\n");
	return ok ? 0 : 3;
}
