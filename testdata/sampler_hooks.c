/* The sampler's own code (internal/sampler/blob/sampler.c) run in this
 * process on a known stream of calls, for the tests of its estimates
 * (internal/sampler): the real hooks, counters, draws and ring, with a
 * fake allocator behind them that hands out addresses in a large
 * read-only mapping of zero pages (the sampler reads the chunk header of a
 * block given to realloc: it finds a size of 0 there).
 *
 * usage: sampler_hooks DRAWS SEED ROUNDS SLOTS DRAIN_EVERY
 *   DRAWS        a file of 4096 little-endian u64 intervals (sampler.Draws)
 *   SEED         the random sequence's state (cfg.draw)
 *   ROUNDS       rounds of: a realloc step of a block growing by 1/8 from
 *                1 KiB to 1 MiB (in place and moving in turn, then a new
 *                block), malloc(4096), malloc(208), calloc(64, 32),
 *                posix_memalign(64, 1024)
 *   SLOTS        the ring's slots (a power of two); the short ring has
 *                64 times as many
 *   DRAIN_EVERY  the rings are read after every this many calls; a read
 *                that finds the short ring under 1/16 full halves the
 *                interval again if the sampler had doubled it, as
 *                arenactl's drain does
 * Prints "T SITE BYTES" (the truth: bytes each site allocated), then
 * "S SITE SIZE SHORT COUNT WEIGHT VAR SHIFT" for the records read (SHORT 1
 * for those of the short ring; WEIGHT the sum of 2^k over whole records, k
 * as their flags say, and VAR of 4^k - 2^k, the variance it estimates;
 * SHIFT the shift of the interval that ended in them, their rate the
 * rate << SHIFT),
 * then "D DROPPED SHORTENED". Sites: 0 realloc, 1 malloc
 * 4096, 2 malloc 208, 3 calloc, 4 posix_memalign. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../internal/sampler/blob/sampler.c"

static u64 next_addr = 0x100000000ull;

static void *f_malloc(size_t n) {
	u64 a = next_addr;
	next_addr += (n + 31) & ~15ull;
	return (void *)a;
}
static void *f_calloc(size_t n, size_t m) { return f_malloc(n * m); }
static int moved;
static void *f_realloc(void *old, size_t n) {
	if (!old) return f_malloc(n);
	moved ^= 1;
	return moved ? f_malloc(n) : old;
}
static int f_posix_memalign(void **out, size_t align, size_t n) {
	next_addr = (next_addr + align - 1) & ~(u64)(align - 1);
	*out = f_malloc(n);
	return 0;
}
static void f_free(void *p) { (void)p; }

enum { NSITES = 5, MAXSIZES = 4096 };
static struct {
	u64 size, shortened, count, shift;
	double weight, var;
	int site;
} seen[NSITES * MAXSIZES];
static int nseen;
static u64 truth[NSITES];

static int site_of(const struct record *r) {
	switch (r->kind) {
	case K_REALLOC: return 0;
	case K_MALLOC: return r->size == 4096 ? 1 : 2;
	case K_CALLOC: return 3;
	default: return 4;
	}
}

static void seen_one(const struct record *r, u64 i, u64 shortened) {
	if (r->seq != i + 1) {
		fprintf(stderr, "record %lu not written\n", i);
		exit(1);
	}
	int s = site_of(r), j;
	u64 shift = (r->flags >> 16) & 0xff;
	for (j = 0; j < nseen; j++)
		if (seen[j].site == s && seen[j].size == r->size && seen[j].shortened == shortened && seen[j].shift == shift) break;
	if (j == nseen) {
		if (nseen == NSITES * MAXSIZES) {
			fprintf(stderr, "too many sizes\n");
			exit(1);
		}
		seen[nseen].site = s, seen[nseen].size = r->size, seen[nseen].shortened = shortened, seen[nseen].shift = shift;
		nseen++;
	}
	seen[j].count++;
	if (!shortened) {
		double w = (double)(1ull << ((r->flags >> 8) & 0x3f));
		seen[j].weight += w;
		seen[j].var += w * w - w;
	}
}

static u64 max_shift;

static void drain(void) {
	if (cfg.shift > max_shift) max_shift = cfg.shift;
	if (cfg.shift > 0 && cfg.shead - cfg.stail < cfg.short_slots / 16) cfg.shift--;
	for (u64 i = cfg.tail; i < cfg.head; i++) seen_one(&cfg.ring[i & (cfg.ring_slots - 1)], i, 0);
	for (u64 i = cfg.stail; i < cfg.shead; i++)
		seen_one((struct record *)((unsigned char *)cfg.shorts + (i & (cfg.short_slots - 1)) * SHORT_SIZE), i, 1);
	cfg.tail = cfg.head;
	cfg.stail = cfg.shead;
	cfg.ftail = cfg.fhead;
}

int main(int argc, char **argv) {
	if (argc != 6) {
		fprintf(stderr, "usage: sampler_hooks DRAWS SEED ROUNDS SLOTS DRAIN_EVERY\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f || fread(cfg.draws, 8, NDRAWS, f) != NDRAWS) {
		perror(argv[1]);
		return 2;
	}
	fclose(f);
	/* Room for every address handed out: 200,000 rounds take 16 GiB. */
	if (mmap((void *)next_addr, 64ull << 30, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0) != (void *)next_addr) {
		perror("mmap");
		return 2;
	}
	cfg.draw = strtoull(argv[2], 0, 0);
	long rounds = atol(argv[3]);
	cfg.ring_slots = strtoull(argv[4], 0, 0);
	long every = atol(argv[5]);
	cfg.ring = calloc(cfg.ring_slots, sizeof(struct record));
	cfg.short_slots = 64 * cfg.ring_slots;
	cfg.shorts = calloc(cfg.short_slots, SHORT_SIZE);
	cfg.frees = calloc(FREE_SLOTS, sizeof(struct freerec));
	cfg.enabled = 1;
	r_malloc = (void *)f_malloc;
	r_calloc = (void *)f_calloc;
	r_realloc = (void *)f_realloc;
	r_posix_memalign = (void *)f_posix_memalign;
	r_free = (void *)f_free;
	counters[thread_slot()] = draw();

	void *(*hmalloc)(size_t) = (void *)h_malloc;
	void *(*hcalloc)(size_t, size_t) = (void *)h_calloc;
	void *(*hrealloc)(void *, size_t) = (void *)h_realloc;
	int (*hmemalign)(void **, size_t, size_t) = (void *)h_posix_memalign;

	void *grown = 0;
	size_t size = 0;
	long calls = 0;
	for (long i = 0; i < rounds; i++) {
		size_t n = size ? size + size / 8 : 1024;
		if (n > (1 << 20)) grown = 0, n = 1024;
		grown = hrealloc(grown, n);
		size = n;
		truth[0] += n;
		hmalloc(4096);
		truth[1] += 4096;
		hmalloc(208);
		truth[2] += 208;
		hcalloc(64, 32);
		truth[3] += 64 * 32;
		void *p;
		hmemalign(&p, 64, 1024);
		truth[4] += 1024;
		for (int k = 0; k < 5; k++)
			if (++calls % every == 0) drain();
	}
	drain();
	for (int s = 0; s < NSITES; s++) printf("T %d %lu\n", s, truth[s]);
	for (int j = 0; j < nseen; j++)
		printf("S %d %lu %lu %lu %.0f %.0f %lu\n", seen[j].site, seen[j].size, seen[j].shortened, seen[j].count, seen[j].weight, seen[j].var, seen[j].shift);
	printf("D %lu %lu %lu\n", cfg.dropped, cfg.shortened, max_shift);
	return 0;
}
