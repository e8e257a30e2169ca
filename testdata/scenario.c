/* Targets that reproduce the memory problems arenactl's diagnosis must
 * recognise, one per mode. Each prints "ready" when its memory is laid out,
 * then waits on stdin for "quit" (printing "clean").
 *
 *   arenas     64 threads at once each allocate and free 6 MiB in small
 *              blocks, then exit: every arena they created stays, with its
 *              free memory (run with MALLOC_ARENA_MAX=2 for the fixed case)
 *   fragment   the main thread allocates 200 MiB in 4 KiB blocks and frees
 *              nine in ten: little in use, much resident and free
 *   threshold  freeing a 8 MiB mmapped block raises the mmap threshold; the
 *              64 blocks of 1 MiB allocated afterwards come from the heap
 *              (run with MALLOC_MMAP_THRESHOLD_=131072 for the fixed case)
 *   stacks     N threads (argv[2], default 48) each touch 2 MiB of their
 *              stack and wait: RSS is mostly stacks, not malloc */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *churn(void *arg) {
	(void)arg;
	enum { N = 6 * 1024 };
	void **p = malloc(N * sizeof *p);
	for (int i = 0; i < N; i++) {
		p[i] = malloc(1000);
		memset(p[i], 1, 1000);
	}
	for (int i = 0; i < N; i++)
		if (i % 64) free(p[i]); /* a few survivors keep the heaps from shrinking */
	return NULL;
}

static pthread_barrier_t go;
static void *churn_together(void *arg) {
	pthread_barrier_wait(&go); /* all at once, so they need many arenas */
	return churn(arg);
}

static void arenas(void) {
	enum { T = 64 };
	pthread_t th[T];
	pthread_barrier_init(&go, NULL, T);
	for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, churn_together, NULL);
	for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
}

static void *volatile keep[60000];

static void fragment(void) {
	enum { N = 50000 };
	for (int i = 0; i < N; i++) {
		keep[i] = malloc(4000);
		memset(keep[i], 2, 4000);
	}
	for (int i = 0; i < N; i++)
		if (i % 10) {
			free(keep[i]);
			keep[i] = NULL;
		}
}

static void threshold(void) {
	void *volatile big = malloc(8 << 20);
	memset(big, 3, 8 << 20);
	free(big); /* mmap_threshold becomes 8 MiB */
	for (int i = 0; i < 64; i++) {
		keep[i] = malloc(1 << 20);
		memset(keep[i], 4, 1 << 20);
		keep[100 + i] = malloc(64); /* a divider, so the frees do not merge */
	}
	for (int i = 0; i < 64; i += 2) free(keep[i]);
}

static volatile int stop_stacks;
static void *deep(void *arg) {
	(void)arg;
	volatile char frame[2 << 20];
	memset((char *)frame, 5, sizeof frame);
	while (!stop_stacks) sleep(1);
	return (void *)(long)frame[7];
}

static void stacks(int n) {
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 4 << 20);
	for (int i = 0; i < n; i++) {
		pthread_t th;
		pthread_create(&th, &a, deep, NULL);
		pthread_detach(th);
	}
	sleep(1); /* let them touch their stacks */
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "arenas"))
		arenas();
	else if (!strcmp(mode, "fragment"))
		fragment();
	else if (!strcmp(mode, "threshold"))
		threshold();
	else if (!strcmp(mode, "stacks"))
		stacks(argc > 2 ? atoi(argv[2]) : 48);
	else if (strcmp(mode, "quiet")) {
		fprintf(stderr, "usage: scenario arenas|fragment|threshold|stacks [N]|quiet\n");
		return 2;
	}
	printf("ready\n");
	char line[64];
	while (fgets(line, sizeof line, stdin))
		if (!strncmp(line, "quit", 4)) break;
	stop_stacks = 1;
	printf("clean\n");
	return 0;
}
