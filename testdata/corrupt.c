/* A target whose heap gets damaged on command, for arenactl's damage tests.
 *
 * A worker thread allocates from an arena of its own and leaves, between
 * blocks it keeps (so nothing coalesces, and nothing touches top):
 *   - two free 0x110 chunks in a small bin (the first 7 frees of that size
 *     fill the worker's tcache; a larger malloc then sorts the next two out
 *     of the unsorted bin into small bin 17);
 *   - one free 0x2010 chunk in the unsorted bin (above the tcache's range);
 *   - two free 0x20 chunks in fastbin 0 (again after 7 tcache'd frees).
 * It then parks in read() forever: it never allocates again, and it must
 * not exit, since its tcache would be flushed into the bins. It counts on
 * a tcache of 7 chunks per size, as glibc 2.26 to 2.41 have by default (the
 * tests run it under the system's glibc): under 2.43 "cycle" damages tcache
 * entries instead.
 *
 * Commands on stdin, one per line, answered on stdout with one line:
 *   size     overwrite the unsorted chunk's size field with
 *            0x4141414141414141: "ok CHUNK"
 *   cycle    make the two small-bin chunks point at each other through fd,
 *            never back to the bin's head: "ok CHUNK1 CHUNK2"
 *   ucycle   make the unsorted chunk's fd point at itself: "ok CHUNK"
 *   wildfd   make the fastbin's head chunk's fd decode (REVEAL_PTR from
 *            2.32) to the misaligned 0x4141414141414141: "ok CHUNK", or
 *            "unsupported" on a glibc without fastbins (2.43+)
 *   busy     start two threads that replace blocks without pause, each in
 *            an arena of its own (created then: fewer arenas than glibc's
 *            limit exist), so that a walk of the running process reads
 *            lists in flux beside the damaged ones: "ok"
 *   churned  "ok N": the replacements the busy threads made so far
 *   check    "ok" (nothing is verified: it proves the process is alive)
 *   quit     "clean", then _exit(0)
 * CHUNK is a chunk address (the user pointer minus 16), in hex.
 *
 * After damaging, no thread calls malloc or free in the damaged arenas
 * (glibc would abort or loop): the busy threads have arenas of their own,
 * and the main thread only reads stdin and prints, and both of its stdio
 * buffers were allocated, from main_arena, before the first command was
 * read. It prints "ready" once the worker has laid its arena out. */
#define _GNU_SOURCE
#include <gnu/libc-version.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TCACHE_FILL 7
#define WILD 0x4141414141414141ull

/* volatile, so that gcc keeps every malloc/free pair. */
static void *volatile smallb[TCACHE_FILL + 2], *volatile fastb[TCACHE_FILL + 2];
static void *volatile unsorted;
static void *volatile keep[64];
static int nkeep;
static int park_pipe[2];
static pthread_barrier_t laid_out;

static void *guard(void) {
	void *p = malloc(0x40);
	memset(p, 0x5a, 0x40);
	keep[nkeep++] = p;
	return p;
}

static void *worker(void *arg) {
	(void)arg;
	for (int i = 0; i < TCACHE_FILL + 2; i++) {
		smallb[i] = malloc(0x100);
		guard();
	}
	unsorted = malloc(0x2000);
	guard();
	for (int i = 0; i < TCACHE_FILL + 2; i++) {
		fastb[i] = malloc(24);
		guard();
	}
	for (int i = 0; i < TCACHE_FILL + 2; i++) free(smallb[i]);
	/* A large request sorts the unsorted bin: the two 0x110 chunks go to
	 * their small bin; it is served from top, past every guard. */
	keep[nkeep++] = malloc(0x3000);
	free(unsorted);
	for (int i = 0; i < TCACHE_FILL + 2; i++) free(fastb[i]);
	pthread_barrier_wait(&laid_out);
	char c;
	for (;;)
		if (read(park_pipe[0], &c, 1) < 0) return NULL;
}

static _Atomic unsigned long churned;

/* Replaces blocks of sizes on both sides of the tcache's range, so that
 * frees land in every kind of bin and coalesce, and requests are served
 * from the bins. */
static void *busy(void *arg) {
	unsigned seed = 2654435761u * (unsigned)(uintptr_t)arg + 1;
	enum { SLOTS = 4096 };
	static void *slots[2][SLOTS];
	void **slot = slots[(uintptr_t)arg];
	for (int i = 0; i < SLOTS; i++) slot[i] = malloc(16 + i % 2000);
	for (;;) {
		for (int k = 0; k < 64; k++) {
			seed = seed * 1103515245u + 12345u;
			unsigned i = (seed >> 8) % SLOTS;
			free(slot[i]);
			seed = seed * 1103515245u + 12345u;
			slot[i] = malloc(16 + (seed >> 8) % 2000);
		}
		churned += 64;
	}
	return NULL;
}

static uintptr_t chunk(void *mem) { return (uintptr_t)mem - 16; }

static int safe_linking(void) {
	int major = 0, minor = 0;
	sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
	return major > 2 || (major == 2 && minor >= 32);
}

static int has_fastbins(void) {
	int major = 0, minor = 0;
	sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
	return major == 2 && minor < 43;
}

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(park_pipe)) return 2;
	pthread_barrier_init(&laid_out, NULL, 2);
	pthread_t th;
	pthread_create(&th, NULL, worker, NULL);
	pthread_barrier_wait(&laid_out);
	printf("ready\n");
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "size", 4)) {
			((uint64_t *)unsorted)[-1] = WILD;
			printf("ok %#lx\n", (unsigned long)chunk(unsorted));
		} else if (!strncmp(line, "cycle", 5)) {
			/* The last two frees of that size are the ones in the bin. */
			void *a = smallb[TCACHE_FILL], *b = smallb[TCACHE_FILL + 1];
			*(uintptr_t *)a = chunk(b);
			*(uintptr_t *)b = chunk(a);
			printf("ok %#lx %#lx\n", (unsigned long)chunk(a), (unsigned long)chunk(b));
		} else if (!strncmp(line, "ucycle", 6)) {
			*(uintptr_t *)unsorted = chunk(unsorted);
			printf("ok %#lx\n", (unsigned long)chunk(unsorted));
		} else if (!strncmp(line, "wildfd", 6)) {
			if (!has_fastbins()) {
				printf("unsupported\n");
				continue;
			}
			/* The fastbin is LIFO: its head is the last chunk freed. */
			void *head = fastb[TCACHE_FILL + 1];
			uint64_t v = WILD;
			if (safe_linking()) v ^= (uintptr_t)head >> 12; /* PROTECT_PTR(&fd, WILD) */
			*(uint64_t *)head = v;
			printf("ok %#lx\n", (unsigned long)chunk(head));
		} else if (!strncmp(line, "busy", 4)) {
			pthread_t b0, b1;
			pthread_create(&b0, NULL, busy, (void *)0);
			pthread_create(&b1, NULL, busy, (void *)1);
			printf("ok\n");
		} else if (!strncmp(line, "churned", 7)) {
			printf("ok %lu\n", (unsigned long)churned);
		} else if (!strncmp(line, "check", 5)) {
			printf("ok\n");
		} else if (!strncmp(line, "quit", 4)) {
			printf("clean\n");
			fflush(stdout);
			_exit(0);
		}
	}
	_exit(0);
}
