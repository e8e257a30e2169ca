/* A target for the RSS waterfall that counts, itself, what each of its
 * lines should hold, and then sits still (blocked in read) while it is
 * measured:
 *   held       chunks it keeps, by chunk size (malloc_usable_size + 8);
 *   trimmable  the whole pages mtrim would madvise in 96 KiB chunks it
 *              freed between kept 32-byte ones (malloc/malloc.c mtrim);
 *   pieces     2 KiB chunks freed between kept ones: no whole page, so
 *              pinned by their neighbours;
 *   top        a worker's thread arena whose chunks it freed into the top
 *              (M_TRIM_THRESHOLD raised so heap_trim keeps it): pinned;
 *   tcache     7 chunks of each of the first 64 tcache sizes, freed;
 *   mmapped    chunks above the mmap threshold, only some pages touched:
 *              the resident bytes of their regions;
 *   anon       a mapping of its own, partly touched;
 *   stacks     STACKS threads with 1 MiB stacks, 256 KiB touched each;
 *   file       a file of FILE_MB MiB (argv[1]) mapped and read through.
 * It prints "ready" then one "truth KEY BYTES ..." line, and answers
 * "quit". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
#define STACKS 4
#define FILE_MB 4

static size_t held, trimmable, pieces, tcache, mmapped, anon, stacks, file, top;

static size_t csize(void *p) { return malloc_usable_size(p) + 8; }

static void keep(void *p, size_t n) {
	memset(p, 0x5a, n);
	held += csize(p);
}

/* mtrim's whole pages of a free chunk at mem (the user pointer). */
static size_t whole_pages(void *mem, size_t chunk) {
	uintptr_t p = (uintptr_t)mem - 16;
	uintptr_t al = (p + 48 + PAGE - 1) & ~(PAGE - 1);
	size_t size = chunk - (al - p);
	return size > PAGE - 1 ? size & ~(PAGE - 1) : 0;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready, stop;

static void wait_stop(void) {
	pthread_mutex_lock(&mu);
	ready++;
	pthread_cond_broadcast(&cv);
	while (!stop) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

/* The first worker leaves 16 MiB free at its arena's top; every worker
 * touches 256 KiB of its stack. */
static void *worker(void *arg) {
	volatile char buf[256 << 10];
	memset((char *)buf, 1, sizeof buf);
	if (arg) {
		enum { N = 256 };
		void *b[N];
		for (int i = 0; i < N; i++) {
			b[i] = malloc(64 << 10);
			memset(b[i], 0x33, 64 << 10);
		}
		for (int i = N - 1; i >= 0; i--) free(b[i]);
		top = (size_t)N * (64 << 10);
	}
	wait_stop();
	return (void *)(uintptr_t)buf[0];
}

int main(int argc, char **argv) {
	static char outbuf[4096]; /* stdout's buffer, not malloc's */
	setvbuf(stdout, outbuf, _IOLBF, sizeof outbuf);
	if (argc < 2) return 2;
	/* heap_trim would give the thread arena's top back above it. */
	mallopt(M_TRIM_THRESHOLD, 1 << 30);

	/* Everything is allocated before anything is freed, so that no
	 * later request splits a chunk freed to be counted. */
	for (int i = 0; i < 2000; i++) keep(malloc(16 << 10), 16 << 10);
	enum { T = 400, P = 8000 };
	static void *big[T], *piece[P], *tc[64][7];
	/* trimmable: 96 KiB blocks, each before a kept 32-byte block. */
	for (int i = 0; i < T; i++) {
		big[i] = malloc(96 << 10);
		memset(big[i], 0x5a, 96 << 10);
		keep(malloc(32), 32);
	}
	/* pinned pieces: 2 KiB blocks between kept ones. */
	for (int i = 0; i < P; i++) {
		piece[i] = malloc(2 << 10);
		memset(piece[i], 0x11, 2 << 10);
		keep(malloc(32), 32);
	}
	/* tcache: 7 chunks of each size class up to 1032 bytes. */
	for (int b = 0; b < 64; b++)
		for (int j = 0; j < 7; j++) {
			tc[b][j] = malloc(b * 16 + 8);
			memset(tc[b][j], 0x22, b * 16 + 8);
		}
	for (int i = 0; i < T; i++) {
		size_t c = csize(big[i]), w = whole_pages(big[i], c);
		trimmable += w;
		pieces += c - w;
		free(big[i]);
	}
	for (int i = 0; i < P; i++) {
		pieces += csize(piece[i]);
		free(piece[i]);
	}
	for (int b = 0; b < 64; b++)
		for (int j = 0; j < 7; j++) {
			tcache += csize(tc[b][j]);
			free(tc[b][j]);
		}

	/* mmapped: 6 chunks of 2 MiB, their first 512 KiB touched. */
	for (int i = 0; i < 6; i++) {
		char *p = malloc(2 << 20);
		memset(p, 0x44, 512 << 10);
		uintptr_t start = (uintptr_t)p - 16, end = ((uintptr_t)p + (512 << 10) + PAGE - 1) & ~(PAGE - 1);
		mmapped += end - start;
	}

	/* anon: 8 MiB of its own, 6 MiB touched. */
	char *a = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED) return 3;
	memset(a, 0x55, 6 << 20);
	anon = 6 << 20;

	/* file: FILE_MB MiB written, mapped and read. */
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) return 4;
	static char chunk[1 << 20];
	memset(chunk, 0x66, sizeof chunk);
	for (int i = 0; i < FILE_MB; i++)
		if (write(fd, chunk, sizeof chunk) != sizeof chunk) return 5;
	volatile char *f = mmap(NULL, FILE_MB << 20, PROT_READ, MAP_PRIVATE, fd, 0);
	if (f == MAP_FAILED) return 6;
	unsigned sum = 0;
	for (size_t i = 0; i < (FILE_MB << 20); i += PAGE) sum += f[i];
	file = FILE_MB << 20;
	close(fd);

	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 1 << 20);
	pthread_t th[STACKS];
	for (int i = 0; i < STACKS; i++) pthread_create(&th[i], &at, worker, i == 0 ? (void *)1 : NULL);
	pthread_mutex_lock(&mu);
	while (ready < STACKS) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	stacks = STACKS * (256 << 10);

	printf("ready %u\n", sum & 1);
	printf("truth held %zu trimmable %zu pieces %zu top %zu tcache %zu mmapped %zu anon %zu stacks %zu file %zu\n",
	       held, trimmable, pieces, top, tcache, mmapped, anon, stacks, file);
	char line[64];
	while (fgets(line, sizeof line, stdin))
		if (!strncmp(line, "quit", 4)) break;
	pthread_mutex_lock(&mu);
	stop = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < STACKS; i++) pthread_join(th[i], NULL);
	printf("clean\n");
	return 0;
}
