/* A target for the heap sampler's tests: WORKERS threads (default 2) each
 * keep 1024 blocks of 16 to 4096 bytes, replacing a random one at every
 * step (malloc, calloc, realloc or posix_memalign, and free), checking the
 * pattern of every block it frees; one block in 16 steps is leaked on
 * purpose (kept forever, in a list) by leak_site(), and its bytes counted.
 *
 * Commands on stdin, answered on stdout:
 *   check   wait for progress, check every kept block: "ok LEAKED" (bytes
 *           leaked so far) or "bad <what>"
 *   fork    fork a child that allocates, checks and frees 10000 blocks and
 *           exits: "forked STATUS" (its wait status; 0 when all went well)
 *   exec    fork a child that execs /bin/true: "execed STATUS"
 *   load P  dlopen P and start a thread calling its lib_leak() every ms:
 *           "loaded" or "bad <dlerror>"
 *   unload  stop that thread and dlclose P (its mappings go): "unloaded" or
 *           "bad <dlerror>"
 *   drop    every worker frees the blocks it keeps and stops: "dropped"
 *           (what stays allocated is leak_site's 1000-byte blocks)
 *   quit    the same, then exit (0, or 3 if bad)
 * It prints "ready" once every worker runs. With CHURN_LEAK_CAP=BYTES in
 * the environment, a worker that has leaked that much frees its oldest
 * leaked block for each new one, so its live set stays flat (a long soak's
 * target) while leak_site still allocates. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEEP 1024

struct worker {
	pthread_t th;
	pthread_mutex_t mu;
	unsigned char *b[KEEP];
	size_t n[KEEP];
	volatile long progress, bad, leaked;
	volatile int stopped;
	void **leaks;
	void **oldest; /* with a cap: the ring's oldest block */
};

static long leak_cap; /* CHURN_LEAK_CAP: bytes per worker, 0: none */

static struct worker *ws;
static int nworkers = 2;

static uint64_t rnd(uint64_t *s) {
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void fill(unsigned char *p, size_t n) {
	for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(((uintptr_t)p + i) * 7);
}

static int ok(const unsigned char *p, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(((uintptr_t)p + i) * 7)) return 0;
	return 1;
}

__attribute__((noinline)) static void *leak_site(size_t n) {
	void **p = malloc(n);
	__asm__ volatile("" ::: "memory");
	return p;
}

static void *alloc(uint64_t *s, size_t n, int kind) {
	void *p = NULL;
	switch (kind) {
	case 0: p = malloc(n); break;
	case 1: p = calloc(1, n); break;
	case 2: p = realloc(NULL, n); break;
	case 3: if (posix_memalign(&p, 64, n)) p = NULL; break;
	}
	(void)s;
	return p;
}

static void *work(void *arg) {
	struct worker *w = arg;
	uint64_t s = (uintptr_t)w | 1;
	pthread_mutex_lock(&w->mu);
	for (int i = 0; i < KEEP; i++) {
		w->n[i] = 16 + rnd(&s) % 4081;
		w->b[i] = malloc(w->n[i]);
		fill(w->b[i], w->n[i]);
	}
	pthread_mutex_unlock(&w->mu);
	for (long step = 0;; step++) {
		pthread_mutex_lock(&w->mu);
		if (w->stopped) {
			pthread_mutex_unlock(&w->mu);
			usleep(1000);
			continue;
		}
		int i = rnd(&s) % KEEP;
		if (!ok(w->b[i], w->n[i])) w->bad++;
		free(w->b[i]);
		w->n[i] = 16 + rnd(&s) % 4081;
		w->b[i] = alloc(&s, w->n[i], rnd(&s) % 4);
		fill(w->b[i], w->n[i]);
		if (step % 16 == 0) {
			void **l = leak_site(1000);
			if (leak_cap > 0) {
				/* A FIFO through the blocks' first words: oldest -> ... -> leaks. */
				*l = NULL;
				if (w->leaks) *w->leaks = l;
				else w->oldest = l;
				w->leaks = l;
				if (w->leaked + 1000 > leak_cap) {
					void **o = w->oldest;
					w->oldest = *o;
					free(o);
				} else {
					w->leaked += 1000;
				}
			} else {
				*l = w->leaks;
				w->leaks = l;
				w->leaked += 1000;
			}
		}
		w->progress++;
		pthread_mutex_unlock(&w->mu);
	}
	return NULL;
}

static int check(char *why, size_t len, long *leaked) {
	long seen[nworkers];
	for (int i = 0; i < nworkers; i++) seen[i] = ws[i].progress;
	for (int i = 0; i < nworkers; i++)
		while (!ws[i].stopped && ws[i].progress < seen[i] + 2) usleep(1000);
	*leaked = 0;
	for (int i = 0; i < nworkers; i++) {
		struct worker *w = &ws[i];
		pthread_mutex_lock(&w->mu);
		for (int j = 0; j < KEEP; j++)
			if (!ok(w->b[j], w->n[j])) w->bad++;
		*leaked += w->leaked;
		long bad = w->bad;
		pthread_mutex_unlock(&w->mu);
		if (bad) {
			snprintf(why, len, "worker %d: %ld blocks changed", i, bad);
			return 0;
		}
	}
	return 1;
}

static int child_work(void) {
	uint64_t s = 12345;
	for (int i = 0; i < 10000; i++) {
		size_t n = 16 + rnd(&s) % 4081;
		unsigned char *p = malloc(n);
		if (!p) return 1;
		fill(p, n);
		if (!ok(p, n)) return 2;
		free(p);
	}
	return 0;
}

static void (*lib_fn)(void);
static void *lib_handle;
static pthread_t lib_thread;
static volatile int lib_stop;

static void *lib_loop(void *arg) {
	(void)arg;
	while (!lib_stop) {
		lib_fn();
		usleep(1000);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 1) nworkers = atoi(argv[1]);
	if (getenv("CHURN_LEAK_CAP")) leak_cap = atol(getenv("CHURN_LEAK_CAP"));
	if (leak_cap > 0 && leak_cap < 1000) leak_cap = 1000; /* the ring holds a block at least */
	ws = calloc(nworkers, sizeof *ws);
	for (int i = 0; i < nworkers; i++) {
		pthread_mutex_init(&ws[i].mu, NULL);
		pthread_create(&ws[i].th, NULL, work, &ws[i]);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	char line[64], why[128];
	long leaked;
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "fork", 4) || !strncmp(line, "exec", 4)) {
			int ex = line[0] == 'e';
			pid_t c = fork();
			if (c == 0) {
				if (ex) execl("/bin/true", "true", (char *)NULL);
				_exit(ex ? 127 : child_work());
			}
			int st = -1;
			waitpid(c, &st, 0);
			printf("%s %d\n", ex ? "execed" : "forked", st);
			continue;
		}
		if (!strncmp(line, "load ", 5)) {
			line[strcspn(line, "\n")] = 0;
			void *h = dlopen(line + 5, RTLD_NOW);
			lib_fn = h ? (void (*)(void))dlsym(h, "lib_leak") : NULL;
			lib_handle = h;
			lib_stop = 0;
			if (lib_fn && pthread_create(&lib_thread, NULL, lib_loop, NULL) == 0) printf("loaded\n");
			else printf("bad %s\n", dlerror());
			continue;
		}
		if (!strncmp(line, "unload", 6)) {
			lib_stop = 1;
			pthread_join(lib_thread, NULL);
			if (lib_handle && dlclose(lib_handle) == 0) printf("unloaded\n");
			else printf("bad %s\n", lib_handle ? dlerror() : "nothing loaded");
			lib_handle = NULL;
			continue;
		}
		if (!strncmp(line, "drop", 4)) {
			for (int i = 0; i < nworkers; i++) {
				struct worker *w = &ws[i];
				pthread_mutex_lock(&w->mu);
				for (int j = 0; j < KEEP; j++) {
					if (w->b[j] && !ok(w->b[j], w->n[j])) w->bad++;
					free(w->b[j]);
					w->b[j] = NULL;
					w->n[j] = 0;
				}
				w->stopped = 1;
				pthread_mutex_unlock(&w->mu);
			}
			printf("dropped\n");
			continue;
		}
		int good = check(why, sizeof why, &leaked);
		if (!good) printf("bad %s\n", why);
		else printf("ok %ld\n", leaked);
		if (!strncmp(line, "quit", 4)) return good ? 0 : 3;
	}
	return 0;
}
