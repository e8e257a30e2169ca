/* A process whose memory is mostly not malloc's, like a database with its
 * buffer pool: for the test that the copy-on-write image leaves such
 * memory out, and leaves the process's own marks alone.
 *
 * usage: pool MIB
 *
 * It maps a pool of MIB mebibytes (anonymous, read-write, at a 64 MiB
 * aligned address, as mariadbd's buffer pool happens to be) and fills it
 * with a pattern; maps a 64 MiB region of its own that it marks
 * MADV_DONTFORK (as RDMA libraries do); builds a heap in the main arena
 * and in two thread arenas; then prints "ready".
 *
 * Commands on stdin, answered on stdout:
 *   check  the pool is one mapping, not marked MADV_DONTFORK, its pattern
 *          intact, and the region it marked still is one mapping, marked:
 *          "ok", or "bad <what>"
 *   fork   fork a child that checks the pool's pattern and that the marked
 *          region is not in its address space: "fork ok", or "fork bad
 *          <what>"
 *   quit   "clean", exit 0 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define ALIGN (64ul << 20)

static uint64_t *pool;
static size_t pool_words;
static char *own;

static uint64_t pattern(size_t i) { return i * 0x9e3779b97f4a7c15ull + 7; }

static void *worker(void *arg) {
	(void)arg;
	void *keep[4096];
	for (int i = 0; i < 4096; i++)
		keep[i] = malloc(16 + (size_t)(i * 37) % 2000);
	for (int i = 0; i < 4096; i += 3)
		free(keep[i]);
	pause();
	return NULL;
}

static int child_check(void) {
	for (size_t i = 0; i < pool_words; i += 512)
		if (pool[i] != pattern(i))
			return 1;
	/* The marked region must not have been copied into this child. */
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 2;
	char line[512];
	unsigned long lo, hi;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= (unsigned long)own && (unsigned long)own < hi)
			return 3;
	fclose(f);
	return 0;
}

/* mapping finds the smaps entry holding addr: its bounds and whether its
 * VmFlags hold "dc" (MADV_DONTFORK). */
static int mapping(void *addr, unsigned long *lo, unsigned long *hi, int *dc) {
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512];
	unsigned long a, b;
	int in = 0, found = -1;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = a <= (unsigned long)addr && (unsigned long)addr < b;
			if (in)
				*lo = a, *hi = b;
		} else if (in && !strncmp(line, "VmFlags:", 8)) {
			*dc = strstr(line, " dc") != NULL;
			found = 0;
		}
	}
	fclose(f);
	return found;
}

static const char *check(size_t len) {
	unsigned long lo, hi;
	int dc;
	for (size_t i = 0; i < pool_words; i += 512)
		if (pool[i] != pattern(i))
			return "bad pool pattern";
	if (mapping(pool, &lo, &hi, &dc) || lo != (unsigned long)pool || hi != (unsigned long)pool + len)
		return "bad pool mapping split";
	if (dc)
		return "bad pool marked dontfork";
	if (mapping(own, &lo, &hi, &dc) || lo != (unsigned long)own || hi != (unsigned long)own + (64 << 20))
		return "bad own mapping split";
	if (!dc)
		return "bad own mark lost";
	return "ok";
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: pool MIB\n");
		return 2;
	}
	size_t len = (size_t)atoi(argv[1]) << 20;
	char *raw = mmap(NULL, len + ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	char *al = (char *)(((uintptr_t)raw + ALIGN - 1) & ~(ALIGN - 1));
	if (al > raw)
		munmap(raw, al - raw);
	munmap(al + len, raw + len + ALIGN - (al + len));
	pool = (uint64_t *)al;
	pool_words = len / 8;
	for (size_t i = 0; i < pool_words; i++)
		pool[i] = pattern(i);

	own = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (own == MAP_FAILED || madvise(own, 64 << 20, MADV_DONTFORK)) {
		perror("own");
		return 1;
	}
	memset(own, 1, 64 << 20);

	void *keep[4096];
	for (int i = 0; i < 4096; i++)
		keep[i] = malloc(16 + (size_t)(i * 53) % 3000);
	for (int i = 0; i < 4096; i += 2)
		free(keep[i]);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	sleep(1); /* the workers' heaps are built */
	printf("ready\n");
	fflush(stdout);

	char cmd[64];
	while (fgets(cmd, sizeof cmd, stdin)) {
		if (!strncmp(cmd, "check", 5)) {
			printf("%s\n", check(len));
		} else if (!strncmp(cmd, "fork", 4)) {
			pid_t c = fork();
			if (c == 0)
				_exit(child_check());
			int st = 0;
			waitpid(c, &st, 0);
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
				printf("fork ok\n");
			else
				printf("fork bad %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		} else if (!strncmp(cmd, "quit", 4)) {
			printf("clean\n");
			fflush(stdout);
			return 0;
		} else {
			printf("unknown\n");
		}
		fflush(stdout);
	}
	return 0;
}
