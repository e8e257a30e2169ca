/*
 * mi_gen: leave glibc's allocator fragmented in four arenas and print
 * malloc_info(0, stdout). Generates the real fixtures in testdata/mallocinfo.
 *
 * Each arena (main + one per thread) gets, after tcache is full for the sizes
 * used: fastbin chunks, small-bin and large-bin chunks (sorted out of the
 * unsorted bin by a later malloc), chunks left in the unsorted bin, and live
 * guards between all of them so nothing coalesces. The main thread also keeps
 * two mmapped chunks alive. Threads start one at a time and stay parked while
 * malloc_info runs, so each owns its own arena and the ring order is stable;
 * the main arena is shaped last, right before malloc_info.
 *
 * Regenerate (from the repository root):
 *   scripts/fetch-glibc.sh            # prints "<version> <ld.so> <libdir>"
 *   S=testdata/glibc/glibc-2.31       # oldest libc: the sysroot
 *   gcc --sysroot=$S -B$S/usr/lib/x86_64-linux-gnu/ -L$S/usr/lib/x86_64-linux-gnu \
 *       -L$S/lib/x86_64-linux-gnu -isystem $S/usr/include \
 *       -isystem $S/usr/include/x86_64-linux-gnu -O1 -pthread \
 *       -o /tmp/mi_gen internal/glibc/testdata/mi_gen.c
 *   /tmp/mi_gen > internal/glibc/testdata/mallocinfo/2.36.xml        # system libc
 *   $LDSO --library-path $LIBDIR /tmp/mi_gen > .../mallocinfo/$VER.xml # others
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXKEEP 512

static char outbuf[1 << 20]; /* static, so stdio does not malloc a buffer */

struct keep {
	void *p[MAXKEEP];
	int n;
};

static void *hold(struct keep *k, size_t sz)
{
	void *p = malloc(sz);
	if (p == NULL || k->n == MAXKEEP)
		abort();
	memset(p, 0x5a, sz);
	k->p[k->n++] = p;
	return p;
}

/* A group is n chunks of one size, each followed by a live guard so that no
 * freed chunk can coalesce with a neighbour or with top. The guard size
 * (chunk 0x90) is never freed, so guards never reuse a freed chunk. */
struct group {
	size_t size;
	int n;
	void *p[32];
};

static void alloc_group(struct keep *k, struct group *g)
{
	for (int i = 0; i < g->n; i++) {
		g->p[i] = malloc(g->size);
		hold(k, 136);
	}
}

static void free_group(struct group *g)
{
	for (int i = 0; i < g->n; i++)
		free(g->p[i]);
}

/* fragment shapes the calling thread's arena; seed varies the counts so the
 * arenas differ in the output. Everything is allocated first and freed last,
 * with a single malloc in between, because any malloc may sort the unsorted
 * bin and any large request consolidates the fastbins. The first 7 frees of a
 * tcache size only fill tcache, which malloc_info does not count. */
static void fragment(struct keep *k, int seed)
{
	struct group binned[] = {
		{200, 9 + seed}, {500, 8 + seed},      /* small bins */
		{3000, 2 + seed}, {9000 + 1000 * seed, 2}, {40000, 1}, /* large */
	};
	struct group later[] = {
		{24, 10 + seed}, {56, 9 + seed}, {100, 8 + seed}, /* fastbins */
		{1500 + 100 * seed, 2}, {2500, 1}, {300, 8},      /* unsorted */
	};
	int nb = sizeof binned / sizeof binned[0];
	int nl = sizeof later / sizeof later[0];

	for (int i = 0; i < nb; i++)
		alloc_group(k, &binned[i]);
	for (int i = 0; i < nl; i++)
		alloc_group(k, &later[i]);

	for (int i = 0; i < nb; i++)
		free_group(&binned[i]);
	/* No free chunk fits: malloc sorts the unsorted bin into the small and
	 * large bins, then carves this from top. */
	hold(k, 70000);
	for (int i = 0; i < nl; i++)
		free_group(&later[i]);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready, done;

static void *worker(void *arg)
{
	static struct keep keeps[3];
	int id = (int)(long)arg;
	fragment(&keeps[id], id + 1);
	pthread_mutex_lock(&mu);
	ready++;
	pthread_cond_broadcast(&cv);
	while (!done)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(void)
{
	static struct keep mainkeep;
	pthread_t t[3];

	setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
	hold(&mainkeep, 1 << 20); /* mmapped: above the 128 KiB threshold */
	hold(&mainkeep, 300000);

	for (long i = 0; i < 3; i++) {
		if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
			abort();
		pthread_mutex_lock(&mu);
		while (ready < i + 1)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
	}

	/* Last, so that pthread_create's own allocations in the main arena
	 * cannot sort its unsorted bin or consolidate its fastbins. */
	fragment(&mainkeep, 0);
	malloc_info(0, stdout);
	fflush(stdout);

	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}
