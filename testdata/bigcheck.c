/* A large heap that checks itself, for the copy-on-write image tests.
 *
 * usage: bigcheck MIB [WORKERS [still]]
 *
 * WORKERS threads (default 4), each in an arena of its own, allocate their
 * share of MIB mebibytes in blocks of 16 to 8192 bytes, fill every block
 * with a pattern made of its address and a per-block generation, and free
 * every third one (so the heap is fragmented and its bins full). Then each
 * loops forever: pick a block, check its pattern, free it, allocate
 * another of a random size, fill it. Each worker does this under its own
 * mutex, so the main thread can check a worker's blocks between two steps.
 * With "still", the workers allocate nothing once the heap is built (the
 * process is idle, for a test that sets a cgroup limit just above it).
 *
 * Commands on stdin, answered on stdout:
 *   check   wait until every worker made progress, then check every block
 *           of every worker: "ok", or "bad <what>"
 *   quit    the same check, then "clean" and exit 0 (3 if anything was bad)
 * It prints "ready" once every worker's heap is built. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct block {
	uint64_t *p;
	size_t words;
	uint64_t gen;
};

struct worker {
	pthread_t th;
	pthread_mutex_t mu;
	struct block *b;
	size_t n;
	size_t bytes;
	volatile long progress;
	volatile long bad;
	int ready;
};

static struct worker *ws;
static int nworkers;
static pthread_mutex_t ready_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cv = PTHREAD_COND_INITIALIZER;
static int nready;
static int still;

static uint64_t rnd(uint64_t *s) {
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t word(const struct block *b, size_t i) { return ((uint64_t)(uintptr_t)b->p ^ (b->gen << 40)) + i * 0x9e3779b97f4a7c15ull; }

static void fill(struct block *b, size_t bytes, uint64_t gen) {
	b->words = bytes / 8;
	b->gen = gen;
	b->p = malloc(b->words * 8);
	if (!b->p) abort();
	for (size_t i = 0; i < b->words; i++) b->p[i] = word(b, i);
}

static int check(const struct block *b) {
	if (!b->p) return 1;
	for (size_t i = 0; i < b->words; i++)
		if (b->p[i] != word(b, i)) return 0;
	return 1;
}

static void *work(void *arg) {
	struct worker *w = arg;
	uint64_t s = (uint64_t)(uintptr_t)w | 1;
	size_t cap = 1024, got = 0;
	w->b = calloc(cap, sizeof *w->b);
	pthread_mutex_lock(&w->mu);
	while (got < w->bytes) {
		if (w->n == cap) {
			cap *= 2;
			w->b = realloc(w->b, cap * sizeof *w->b);
		}
		size_t sz = 16 + rnd(&s) % 8177;
		fill(&w->b[w->n], sz, w->n);
		got += sz;
		w->n++;
	}
	for (size_t i = 0; i < w->n; i += 3) {
		free(w->b[i].p);
		w->b[i].p = NULL;
	}
	pthread_mutex_unlock(&w->mu);
	pthread_mutex_lock(&ready_mu);
	nready++;
	pthread_cond_broadcast(&ready_cv);
	pthread_mutex_unlock(&ready_mu);
	for (uint64_t gen = 1;; gen++) {
		if (still) {
			w->progress++;
			usleep(1000);
			continue;
		}
		pthread_mutex_lock(&w->mu);
		struct block *b = &w->b[rnd(&s) % w->n];
		if (b->p) {
			if (!check(b)) w->bad++;
			free(b->p);
		}
		fill(b, 16 + rnd(&s) % 8177, gen);
		w->progress++;
		pthread_mutex_unlock(&w->mu);
	}
	return NULL;
}

static int check_all(char *why, size_t len) {
	long seen[nworkers];
	for (int i = 0; i < nworkers; i++) seen[i] = ws[i].progress;
	for (int i = 0; i < nworkers; i++)
		while (ws[i].progress < seen[i] + 2) usleep(1000);
	for (int i = 0; i < nworkers; i++) {
		struct worker *w = &ws[i];
		pthread_mutex_lock(&w->mu);
		for (size_t j = 0; j < w->n; j++)
			if (!check(&w->b[j])) w->bad++;
		long bad = w->bad;
		pthread_mutex_unlock(&w->mu);
		if (bad) {
			snprintf(why, len, "worker %d: %ld blocks changed", i, bad);
			return 0;
		}
	}
	return 1;
}

int main(int argc, char **argv) {
	if (argc < 2) return 2;
	size_t mib = strtoull(argv[1], NULL, 10);
	nworkers = argc > 2 ? atoi(argv[2]) : 4;
	still = argc > 3 && !strcmp(argv[3], "still");
	mallopt(M_ARENA_MAX, nworkers + 1);
	ws = calloc(nworkers, sizeof *ws);
	for (int i = 0; i < nworkers; i++) {
		pthread_mutex_init(&ws[i].mu, NULL);
		ws[i].bytes = (mib << 20) / nworkers;
		pthread_create(&ws[i].th, NULL, work, &ws[i]);
	}
	pthread_mutex_lock(&ready_mu);
	while (nready < nworkers) pthread_cond_wait(&ready_cv, &ready_mu);
	pthread_mutex_unlock(&ready_mu);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	char line[64], why[128];
	while (fgets(line, sizeof line, stdin)) {
		int ok = check_all(why, sizeof why);
		if (!strncmp(line, "quit", 4)) {
			printf(ok ? "clean\n" : "bad %s\n", why);
			return ok ? 0 : 3;
		}
		printf(ok ? "ok\n" : "bad %s\n", why);
	}
	return 0;
}
