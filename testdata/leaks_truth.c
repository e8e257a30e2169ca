/* A target for the statistical test of arenactl leaks (issue 18): threads
 * allocate from five sites, each behind its own noinline function, and
 * log every block those sites hand out with the time it was allocated
 * and the time it was given back (realloc included: in place or moving,
 * a realloc gives back the old block and allocates the new one), so that
 * the truth over any window can be told afterwards: the bytes a site
 * allocated in [start, end) and still held at end. A churn of small
 * blocks, freed at once and not logged, adds load.
 *
 * A realloc counts what it added to the block (its new size less the
 * old block's usable size, malloc_usable_size, read before the call; 0
 * for a shrink), and the entries of every call that added to a block are
 * given back together, when the block is freed (issue 29: a window's
 * profile says which code made the heap grow in it).
 *
 * Sites: 0 grow_realloc (a buffer grown by 1/8 from 1 KiB to 1 MiB, then
 * kept), 1 leak_malloc (4096), 2 leak_calloc (64 x 32), 3 leak_memalign
 * (posix_memalign 64, 1024), 4 leak_aligned (aligned_alloc 256, 768),
 * 5 leak_in_thread (2560, from threads that a spawner starts every 5 ms
 * and that exit after 64 calls: threads created and exiting during the
 * window), 6 leak_in_handler (4 x 1536, from a SIGUSR1 handler the
 * spawner raises in the workers every millisecond; a worker takes it
 * only between two rounds of calls, never inside malloc), 7 leak_new
 * (C++'s operator new of 208 bytes, called by its mangled name _Znwm:
 * libstdc++ reaches malloc through its own GOT, so the sample must be
 * counted once, for this caller, not for operator new), 8 grow_log (NLOGS
 * logs per worker, each grown by realloc by LOG_STEP bytes at most every
 * LOG_EVERY_NS, to LOG_MAX, then freed: each lives for about ten seconds,
 * across windows, and most windows see it grown from a block allocated
 * before them). The spawner
 * also forks a child every 100 ms that allocates and exits: its calls go
 * through the hooks into its own copy of the ring, never the parent's.
 * Each site keeps its last blocks (KEEP among the workers, KEEP for the
 * short-lived threads) and frees older ones,
 * so memory stays bounded.
 *
 * Built with -lstdc++.
 *
 * usage: leaks_truth THREADS BYTES_PER_SECOND_PER_THREAD [CHURN]
 * CHURN (1) is how many rounds of the churn each worker's round has: many
 * make a load of mostly unlogged calls, whose log does not outgrow the
 * machine when the threads run flat out.
 * Commands on stdin:
 *   truth START_NS END_NS  "truth B0 ... B8" (CLOCK_REALTIME ns)
 *   pause                  "paused" once every worker waits between two
 *                          rounds (no allocator call under way)
 *   grown                  "grown A ..." the addresses of every worker's
 *                          grow_realloc buffers held now (while paused)
 *   resume                 "resumed", the workers go on
 *   quit                   "bye", exit 0
 * Prints "ready" once every thread runs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { NSITES = 9, SHORT_CALLS = 64, KEEP = 4096, KEEP_GROWN = 8, MAXLOG = 1 << 24, MAXTHREADS = 64, MAXCHAIN = 128 };

struct entry {
	int64_t at, freed; /* ns, CLOCK_REALTIME; freed 0: held */
	uint32_t size, site;
};

struct thread_log {
	struct entry *e;
	volatile long n; /* entries published */
	int full;
};

static struct thread_log logs[MAXTHREADS];
static int keep_depth = KEEP; /* per worker: KEEP shared among them, from 64 */
static volatile int started;
static long budget; /* bytes per second per thread */
static int churn_rounds = 1;

static int64_t now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* logged records a block; its index, to mark it freed later. */
static long logged(struct thread_log *l, int site, size_t size) {
	long i = l->n;
	if (i == MAXLOG) {
		l->full = 1;
		return -1;
	}
	l->e[i].at = now();
	l->e[i].freed = 0;
	l->e[i].size = (uint32_t)size;
	l->e[i].site = (uint32_t)site;
	__atomic_store_n(&l->n, i + 1, __ATOMIC_RELEASE);
	return i;
}

static void given_back(struct thread_log *l, long i) {
	if (i >= 0) __atomic_store_n(&l->e[i].freed, now(), __ATOMIC_RELEASE);
}

struct kept {
	void *p[KEEP];
	long idx[KEEP];
	int next, n;
};

/* chain is the log entries of the calls that made one block, given back
 * together when it is freed. */
struct chain {
	long idx[MAXCHAIN];
	int n;
};

static void chained(struct chain *c, long idx) {
	if (c->n == MAXCHAIN) abort();
	c->idx[c->n++] = idx;
}

static void chain_given_back(struct thread_log *l, struct chain *c) {
	for (int i = 0; i < c->n; i++) given_back(l, c->idx[i]);
	c->n = 0;
}

/* added is what a realloc of p to n bytes adds to the block. */
static size_t added(void *p, size_t n) {
	size_t had = p ? malloc_usable_size(p) : 0;
	return n > had ? n - had : 0;
}

static void keep(struct thread_log *l, struct kept *k, int depth, void *p, long idx) {
	if (k->n == depth) {
		given_back(l, k->idx[k->next]);
		free(k->p[k->next]);
	} else {
		k->n++;
	}
	k->p[k->next] = p;
	k->idx[k->next] = idx;
	k->next = (k->next + 1) % depth;
}

struct state {
	struct thread_log *l;
	struct kept kept[NSITES];
	char *grown;
	size_t grown_size;
	struct chain grown_chain;
	/* The grown buffers kept, in keep's order, with their chains. */
	struct chain kept_chains[KEEP_GROWN];
	struct log {
		char *p;
		size_t size;
		int64_t last; /* ns, when it last grew */
		struct chain chain;
	} logs[8]; /* NLOGS */
	int next_log;
};

__attribute__((noinline)) size_t grow_realloc(struct state *s) {
	size_t n = s->grown_size ? s->grown_size + s->grown_size / 8 : 1024;
	if (n > (1 << 20)) {
		/* The buffer is kept; the oldest kept one is freed. */
		struct kept *k = &s->kept[0];
		int slot = k->next;
		if (k->n == KEEP_GROWN) {
			free(k->p[slot]);
			chain_given_back(s->l, &s->kept_chains[slot]);
		} else {
			k->n++;
		}
		k->p[slot] = s->grown;
		s->kept_chains[slot] = s->grown_chain;
		k->next = (slot + 1) % KEEP_GROWN;
		s->grown = NULL;
		s->grown_size = 0;
		s->grown_chain.n = 0;
		n = 1024;
	}
	size_t a = added(s->grown, n);
	char *p = realloc(s->grown, n);
	chained(&s->grown_chain, logged(s->l, 0, a));
	p[n - 1] = 1;
	s->grown = p;
	s->grown_size = n;
	__asm__ volatile("" ::: "memory"); /* no tail call */
	return n;
}

enum { NLOGS = 8, LOG_STEP = 1024, LOG_MAX = 96 << 10, LOG_EVERY_NS = 100000000 };

/* grow_log appends LOG_STEP bytes to the next of the thread's logs, if it
 * did not grow in the last LOG_EVERY_NS; a log is freed once it has
 * reached LOG_MAX. */
__attribute__((noinline)) size_t grow_log(struct state *s) {
	struct log *g = &s->logs[s->next_log];
	s->next_log = (s->next_log + 1) % NLOGS;
	int64_t t = now();
	if (t - g->last < LOG_EVERY_NS) return 0;
	g->last = t;
	if (g->size + LOG_STEP > LOG_MAX) {
		free(g->p);
		chain_given_back(s->l, &g->chain);
		g->p = NULL;
		g->size = 0;
	}
	size_t n = g->size + LOG_STEP;
	size_t a = added(g->p, n);
	char *p = realloc(g->p, n);
	chained(&g->chain, logged(s->l, 8, a));
	memset(p + g->size, 1, LOG_STEP);
	g->p = p;
	g->size = n;
	__asm__ volatile("" ::: "memory");
	return a;
}

__attribute__((noinline)) size_t leak_malloc(struct state *s) {
	void *p = malloc(4096);
	keep(s->l, &s->kept[1], keep_depth, p, logged(s->l, 1, 4096));
	__asm__ volatile("" ::: "memory");
	return 4096;
}

__attribute__((noinline)) size_t leak_calloc(struct state *s) {
	void *p = calloc(64, 32);
	keep(s->l, &s->kept[2], keep_depth, p, logged(s->l, 2, 64 * 32));
	__asm__ volatile("" ::: "memory");
	return 64 * 32;
}

__attribute__((noinline)) size_t leak_memalign(struct state *s) {
	void *p;
	if (posix_memalign(&p, 64, 1024)) abort();
	keep(s->l, &s->kept[3], keep_depth, p, logged(s->l, 3, 1024));
	__asm__ volatile("" ::: "memory");
	return 1024;
}

__attribute__((noinline)) size_t leak_aligned(struct state *s) {
	void *p = aligned_alloc(256, 768);
	keep(s->l, &s->kept[4], keep_depth, p, logged(s->l, 4, 768));
	__asm__ volatile("" ::: "memory");
	return 768;
}

void *_Znwm(size_t); /* operator new(unsigned long) */

__attribute__((noinline)) size_t leak_new(struct state *s) {
	void *p = _Znwm(208);
	keep(s->l, &s->kept[7], keep_depth, p, logged(s->l, 7, 208));
	__asm__ volatile("" ::: "memory");
	return 208;
}

__attribute__((noinline)) size_t churn(unsigned *seed) {
	void *ps[8];
	size_t n = 0;
	for (int i = 0; i < 8; i++) {
		size_t sz = 64 + (rand_r(seed) % 4097);
		ps[i] = malloc(sz);
		n += sz;
	}
	for (int i = 0; i < 8; i++) free(ps[i]);
	__asm__ volatile("" ::: "memory");
	return n;
}

/* The short-lived threads' blocks: one log and one list of kept blocks,
 * under a lock. */
static pthread_mutex_t short_mu = PTHREAD_MUTEX_INITIALIZER;
static struct thread_log shortlog;
static struct kept short_kept;

__attribute__((noinline)) size_t leak_in_thread(void) {
	void *p = malloc(2560);
	pthread_mutex_lock(&short_mu);
	keep(&shortlog, &short_kept, KEEP, p, logged(&shortlog, 5, 2560));
	pthread_mutex_unlock(&short_mu);
	__asm__ volatile("" ::: "memory");
	return 2560;
}

static volatile int short_alive;

static void *short_lived(void *arg) {
	(void)arg;
	for (int i = 0; i < SHORT_CALLS; i++) leak_in_thread();
	__atomic_sub_fetch(&short_alive, 1, __ATOMIC_RELAXED);
	return NULL;
}

static __thread struct state *me;
static pthread_t workers[MAXTHREADS];
static int nworkers;

__attribute__((noinline)) void leak_in_handler(void) {
	for (int i = 0; i < 4; i++) {
		void *p = malloc(1536);
		keep(me->l, &me->kept[6], keep_depth, p, logged(me->l, 6, 1536));
	}
	__asm__ volatile("" ::: "memory");
}

static void on_usr1(int sig) {
	(void)sig;
	if (me) leak_in_handler();
}

static void *spawner(void *arg) {
	(void)arg;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	for (long k = 0;; k++) {
		pthread_t t;
		/* At most 8 at once: with the workers flat out on few CPUs,
		 * they would pile up by the hundred. */
		if (k % 5 == 0 && __atomic_load_n(&short_alive, __ATOMIC_RELAXED) < 8) {
			__atomic_add_fetch(&short_alive, 1, __ATOMIC_RELAXED);
			if (pthread_create(&t, &a, short_lived, NULL)) __atomic_sub_fetch(&short_alive, 1, __ATOMIC_RELAXED);
		}
		pthread_kill(workers[k % nworkers], SIGUSR1);
		if (k % 100 == 50) {
			pid_t c = fork();
			if (c == 0) {
				for (int i = 0; i < 1000; i++) free(malloc(4096 + i));
				for (int i = 0; i < 100; i++) (void)!malloc(4096);
				_exit(0);
			}
		}
		while (waitpid(-1, NULL, WNOHANG) > 0) {
		}
		usleep(1000);
	}
	return NULL;
}

static struct state *states[MAXTHREADS];
static volatile int pause_req;
static int parked;

static void *worker(void *arg) {
	long id = (long)arg;
	struct state *s = calloc(1, sizeof *s);
	states[id] = s;
	s->l = &logs[id];
	me = s;
	/* Each thread's buffer starts at its own size, so that threads do
	 * not grow (and pause for their budget) in step. */
	s->grown_size = (size_t)1024 << (id % 10);
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	unsigned seed = (unsigned)id * 7919 + 1;
	__atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
	int64_t t0 = now();
	long done = 0;
	for (long i = 0;; i++) {
		/* Realloc growth and the small sites take turns, so that small
		 * calls follow large blocks. */
		switch (i % 16) {
		case 0: case 8: done += grow_realloc(s); break;
		case 1: case 9: case 13: done += leak_malloc(s); break;
		case 2: case 10: case 14: done += leak_calloc(s); break;
		case 3: case 11: case 6: done += leak_memalign(s); break;
		case 5: case 12: case 7: done += leak_aligned(s); break;
		case 4: done += leak_new(s) + leak_new(s) + leak_new(s) + leak_new(s); break;
		default:
			for (int c = 0; c < churn_rounds; c++) done += churn(&seed);
			done += grow_log(s);
			break;
		}
		if ((i & 15) == 15 && pause_req) {
			__atomic_add_fetch(&parked, 1, __ATOMIC_RELEASE);
			while (pause_req) usleep(200);
			__atomic_sub_fetch(&parked, 1, __ATOMIC_RELEASE);
		}
		if ((i & 15) == 15) {
			/* SIGUSR1 is taken here only, outside every allocator call. */
			pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
			pthread_sigmask(SIG_BLOCK, &usr1, NULL);
		}
		if ((i & 63) == 0) {
			/* At most `budget` bytes a second (in double: done * 1e9
			 * overflowed int64 after about 150 s, and the soak's later
			 * windows ran unthrottled). */
			int64_t ahead = (int64_t)((double)done * 1e9 / (double)budget) - (now() - t0);
			if (ahead > 0) {
				struct timespec ts = {ahead / 1000000000, ahead % 1000000000};
				nanosleep(&ts, NULL);
			}
		}
	}
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 2;
	budget = argc > 2 ? atol(argv[2]) : 50 << 20;
	churn_rounds = argc > 3 ? atoi(argv[3]) : 1;
	if (churn_rounds < 1) churn_rounds = 1;
	if (n > MAXTHREADS) n = MAXTHREADS;
	nworkers = n;
	keep_depth = 2 * KEEP / n < 64 ? 64 : 2 * KEEP / n;
	if (keep_depth > KEEP) keep_depth = KEEP;
	struct sigaction sa = {.sa_handler = on_usr1};
	sigaction(SIGUSR1, &sa, NULL);
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL); /* inherited by every thread */
	for (long i = 0; i < n; i++) {
		logs[i].e = mmap(NULL, sizeof(struct entry) * (size_t)MAXLOG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (logs[i].e == MAP_FAILED) return 1;
		pthread_create(&workers[i], NULL, worker, (void *)i);
	}
	shortlog.e = mmap(NULL, sizeof(struct entry) * (size_t)MAXLOG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (shortlog.e == MAP_FAILED) return 1;
	pthread_t sp;
	pthread_create(&sp, NULL, spawner, NULL);
	while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < n) usleep(1000);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "quit", 4)) {
			printf("bye\n");
			fflush(stdout);
			_exit(0);
		}
		if (!strncmp(line, "pause", 5)) {
			pause_req = 1;
			while (__atomic_load_n(&parked, __ATOMIC_ACQUIRE) < n) usleep(100);
			printf("paused\n");
			continue;
		}
		if (!strncmp(line, "resume", 6)) {
			pause_req = 0;
			printf("resumed\n");
			continue;
		}
		if (!strncmp(line, "grown", 5)) {
			printf("grown");
			for (int t = 0; t < n; t++) {
				struct state *st = states[t];
				if (st->grown) printf(" %lx", (unsigned long)st->grown);
				for (int k = 0; k < st->kept[0].n; k++) printf(" %lx", (unsigned long)st->kept[0].p[k]);
			}
			printf("\n");
			continue;
		}
		long long start, end;
		if (sscanf(line, "truth %lld %lld", &start, &end) != 2) {
			printf("what?\n");
			continue;
		}
		uint64_t sum[NSITES] = {0};
		int full = 0;
		for (int t = 0; t <= n; t++) {
			struct thread_log *l = t < n ? &logs[t] : &shortlog;
			long m = __atomic_load_n(&l->n, __ATOMIC_ACQUIRE);
			full |= l->full;
			for (long i = 0; i < m; i++) {
				struct entry *e = &l->e[i];
				int64_t freed = __atomic_load_n(&e->freed, __ATOMIC_ACQUIRE);
				if (e->at >= start && e->at < end && (freed == 0 || freed >= end)) sum[e->site] += e->size;
			}
		}
		if (full) {
			printf("full\n");
			continue;
		}
		printf("truth %lu %lu %lu %lu %lu %lu %lu %lu %lu\n", sum[0], sum[1], sum[2], sum[3], sum[4], sum[5], sum[6], sum[7], sum[8]);
	}
	return 0;
}
