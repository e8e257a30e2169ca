/* The reachability scan's worst case: a heap where every word of every
 * chunk is an interior pointer into another chunk, for internal/reach's
 * parallel scan and its benchmark (issue 28: 2 M chunks took a serial scan
 * 25.8 s).
 *
 *   ptrdense [CHUNKS [THREADS]]
 *
 * CHUNKS blocks of 72 bytes (80-byte chunks: 2 M of them are 160 MiB),
 * spread over THREADS arenas (default 1: the main arena), each of whose 9
 * words points to a random 8-byte-aligned place inside a random block. One
 * global array (itself an mmapped chunk) holds every block's address, so
 * every block is reachable from static data. It prints
 * "ready CHUNKS BYTES" and then reads commands on stdin: "quit" answers
 * "bye" and exits, as does EOF. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQ 72
#define WORDS (REQ / 8)

static uint64_t **blocks;
static long nblocks;
static int nthreads = 1;

static uint64_t rnd(uint64_t *s) {
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *alloc_part(void *arg) {
	long t = (long)arg;
	for (long i = t; i < nblocks; i += nthreads) {
		blocks[i] = malloc(REQ);
		if (!blocks[i]) {
			perror("malloc");
			exit(1);
		}
	}
	return NULL;
}

int main(int argc, char **argv) {
	nblocks = argc > 1 ? atol(argv[1]) : 2097152;
	if (argc > 2)
		nthreads = atoi(argv[2]);
	if (nblocks < 1 || nthreads < 1 || nthreads > 64) {
		fprintf(stderr, "usage: ptrdense [CHUNKS [THREADS]]\n");
		return 2;
	}
	blocks = malloc(nblocks * sizeof *blocks);
	pthread_t th[64];
	for (long t = 1; t < nthreads; t++)
		pthread_create(&th[t], NULL, alloc_part, (void *)t);
	alloc_part(0);
	for (long t = 1; t < nthreads; t++)
		pthread_join(th[t], NULL);
	uint64_t s = 88172645463325252ull;
	for (long i = 0; i < nblocks; i++)
		for (int w = 0; w < WORDS; w++)
			blocks[i][w] = (uint64_t)blocks[rnd(&s) % nblocks] + 8 * (rnd(&s) % WORDS);
	printf("ready %ld %ld\n", nblocks, nblocks * (long)REQ);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (strncmp(line, "quit", 4) == 0) {
			printf("bye\n");
			fflush(stdout);
			return 0;
		}
	}
	return 0;
}
