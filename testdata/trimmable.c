/* A target for `arenactl trim`: the main thread and one worker each allocate
 * runs of 96 KiB blocks separated by small kept blocks, touch every page,
 * then free the large ones. The freed runs cannot coalesce (a kept block
 * sits between each pair) and stay resident until malloc_trim madvises
 * them. It prints "ready FREED_BYTES" and then answers the arenas.c
 * protocol's "check" and "quit". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (96 << 10)

struct part {
	int n;
	void **keep;
	size_t freed;
};

static void carve(struct part *p) {
	void **big = malloc(p->n * sizeof *big);
	p->keep = malloc(p->n * sizeof *p->keep);
	for (int i = 0; i < p->n; i++) {
		big[i] = malloc(BIG);
		memset(big[i], 0x5a, BIG);
		p->keep[i] = malloc(32);
		memset(p->keep[i], i & 0xff, 32);
	}
	for (int i = 0; i < p->n; i++) free(big[i]);
	free(big);
	p->freed = (size_t)p->n * BIG;
}

static int intact(struct part *p) {
	for (int i = 0; i < p->n; i++)
		for (int j = 0; j < 32; j++)
			if (((unsigned char *)p->keep[i])[j] != (i & 0xff)) return 0;
	return 1;
}

static struct part mainp = {.n = 1200}, workp = {.n = 600};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int carved, stop;

static void *worker(void *arg) {
	(void)arg;
	carve(&workp);
	pthread_mutex_lock(&mu);
	carved = 1;
	pthread_cond_broadcast(&cv);
	while (!stop) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_t th;
	pthread_create(&th, NULL, worker, NULL);
	carve(&mainp);
	pthread_mutex_lock(&mu);
	while (!carved) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	printf("ready %zu\n", mainp.freed + workp.freed);
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "check", 5))
			printf(intact(&mainp) && intact(&workp) ? "ok\n" : "corrupt\n");
		else if (!strncmp(line, "quit", 4))
			break;
	}
	pthread_mutex_lock(&mu);
	stop = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	int ok = intact(&mainp) && intact(&workp);
	printf(ok ? "clean\n" : "corrupt\n");
	return ok ? 0 : 3;
}
