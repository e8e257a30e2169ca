/* A target for arenactl growth that counts its own growth per site. Each
 * command runs one site and answers "ok BYTES": the bytes that site
 * touched for the first time (or, for trim, gave back by its own count).
 *
 *   map N      map_pages: a direct anonymous mmap of N MiB, touched page by page
 *   mapk N     map_pages too, of N KiB (under 2 MiB the kernel places it right
 *              below the last mapping, where it merges with a neighbour)
 *   big N      big_blocks: N mallocs of 1 MiB (mmapped chunks), each touched
 *   small N    small_blocks in the main thread and in two threads created
 *              now (each with an arena of its own): N MiB each, in 4000-byte
 *              mallocs, each touched; answers the main thread's bytes, then
 *              each thread's: "ok MAIN T1 T2"
 *   file PATH  read_file: maps PATH read-only and reads a byte of every page
 *   fileslow PATH US
 *              read_slowly: maps PATH read-only and reads a byte of each
 *              page in turn, sleeping US microseconds after each: answers
 *              the bytes of the pages it read ("ok BYTES")
 *   threads K  K threads created and joined (their stacks)
 *   churn N    N maps, touches of a page and unmaps, at once, by two sites
 *              through one helper:
 *              churn_a maps 64 KiB, churn_b 192 KiB, a in 3 turns of 4 at
 *              random; answers the bytes each mapped: "ok A B". The helper's
 *              frame is larger than a short stack copy, so both sites'
 *              short stacks end in it alike: only whole stacks tell them
 *              apart, and by count they split 3:1 where by bytes 1:1.
 *   fork N     forks a child that touches N MiB (mmap and malloc) and exits;
 *              waits for it: "ok 0", the parent touched nothing
 *   exec K     forks K children that exec this program as "brk": each grows
 *              its own break by 16 MiB, touches it and exits; "ok 0"
 *   trim       frees the main thread's small blocks (a fence keeps them from
 *              the top) and calls malloc_trim(0): "ok FREED"
 *   quit       exits, saying "bye"
 * It prints "ready" first. Built -O2 -fomit-frame-pointer by the tests, so
 * the stacks unwind only with CFI. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SMALL 4000
#define MAXSMALL (1 << 20)

static void *smalls[MAXSMALL];
static int nsmall;
static volatile char sink;

__attribute__((noinline)) static size_t map_pages(size_t n) {
	char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) return 0;
	for (size_t i = 0; i < n; i += 4096) p[i] = 1;
	return n;
}

__attribute__((noinline)) static size_t big_blocks(long count) {
	size_t n = 0;
	for (long i = 0; i < count; i++) {
		char *p = malloc(1 << 20);
		if (!p) break;
		memset(p, 2, 1 << 20);
		n += 1 << 20;
	}
	return n;
}

/* small_blocks allocates mib MiB in SMALL-byte blocks; keep: remember
 * them for trim (the main thread's). */
__attribute__((noinline)) static size_t small_blocks(long mib, int keep) {
	size_t n = 0;
	for (long i = 0; i < (mib << 20) / SMALL; i++) {
		char *p = malloc(SMALL);
		if (!p) break;
		memset(p, 3, SMALL);
		n += SMALL;
		if (keep && nsmall < MAXSMALL) smalls[nsmall++] = p;
	}
	return n;
}

/* map_via maps and unmaps n bytes; its frame (buf) is larger than the
 * short stack copy of arenactl's eBPF program (256 bytes). */
__attribute__((noinline)) static size_t map_via(size_t n) {
	volatile char buf[1024];
	buf[0] = 1;
	char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) return 0;
	p[0] = 1;
	munmap(p, n);
	return n + buf[0] - 1;
}

/* The empty asm after each call keeps it from being a tail call: the
 * sites' frames stay on the stack. */
__attribute__((noinline)) static size_t churn_a(void) {
	size_t r = map_via(64 << 10);
	__asm__ volatile("" : "+r"(r));
	return r;
}
__attribute__((noinline)) static size_t churn_b(void) {
	size_t r = map_via(192 << 10);
	__asm__ volatile("" : "+r"(r));
	return r;
}

static void churn(long n, size_t *a, size_t *b) {
	unsigned long x = 88172645463325252UL;
	*a = *b = 0;
	for (long i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (x % 4) *a += churn_a();
		else *b += churn_b();
	}
}

static pthread_barrier_t both;

/* Both threads live until both are done, so that neither takes the
 * other's arena from the free list. */
static void *small_thread(void *arg) {
	size_t n = small_blocks((long)arg, 0);
	pthread_barrier_wait(&both);
	return (void *)n;
}

__attribute__((noinline)) static size_t read_file(const char *path) {
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) return 0;
	char *p = mmap(0, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) return 0;
	for (off_t i = 0; i < st.st_size; i += 4096) sink += p[i];
	return st.st_size;
}

__attribute__((noinline)) static size_t read_slowly(const char *path, long us) {
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) return 0;
	char *p = mmap(0, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) return 0;
	size_t n = 0;
	for (off_t i = 0; i < st.st_size; i += 4096) {
		sink += p[i];
		n += 4096;
		if (us > 0) usleep(us);
	}
	return n;
}

static void *idle(void *arg) {
	(void)arg;
	return 0;
}

__attribute__((noinline)) static size_t trim(void) {
	void *fence = malloc(SMALL); /* keeps the freed blocks from the top */
	size_t n = 0;
	for (int i = 0; i < nsmall; i++) {
		free(smalls[i]);
		n += SMALL;
	}
	nsmall = 0;
	malloc_trim(0);
	sink += *(volatile char *)fence;
	return n;
}

/* child_touch is a forked child's growth: none of it is the parent's. */
__attribute__((noinline)) static void child_touch(long mib) {
	map_pages((size_t)mib << 19);
	big_blocks(mib / 2);
	_exit(0);
}

/* grow_break is what an exec'd child does: brk calls of its own, in a
 * process that is not the target. */
static int grow_break(void) {
	for (int i = 0; i < 16; i++) {
		char *p = sbrk(1 << 20);
		if (p == (void *)-1) return 1;
		memset(p, 4, 1 << 20);
	}
	sbrk(-(8 << 20));
	return 0;
}

int main(int argc, char **argv) {
	char line[256], arg[200];
	long n;
	if (argc > 1 && strcmp(argv[1], "brk") == 0) return grow_break();
	setvbuf(stdout, 0, _IOLBF, 0);
	printf("ready %d\n", getpid());
	while (fgets(line, sizeof line, stdin)) {
		if (sscanf(line, "map %ld", &n) == 1) {
			printf("ok %zu\n", map_pages((size_t)n << 20));
		} else if (sscanf(line, "mapk %ld", &n) == 1) {
			printf("ok %zu\n", map_pages((size_t)n << 10));
		} else if (sscanf(line, "big %ld", &n) == 1) {
			printf("ok %zu\n", big_blocks(n));
		} else if (sscanf(line, "small %ld", &n) == 1) {
			pthread_t t1, t2;
			void *r1, *r2;
			/* Both alive at once: each takes a new arena (while the
			 * count is below 8 × CPUs). */
			pthread_barrier_init(&both, 0, 2);
			pthread_create(&t1, 0, small_thread, (void *)n);
			pthread_create(&t2, 0, small_thread, (void *)n);
			size_t m = small_blocks(n, 1);
			pthread_join(t1, &r1);
			pthread_join(t2, &r2);
			pthread_barrier_destroy(&both);
			printf("ok %zu %zu %zu\n", m, (size_t)r1, (size_t)r2);
		} else if (sscanf(line, "fileslow %199s %ld", arg, &n) == 2) {
			printf("ok %zu\n", read_slowly(arg, n));
		} else if (sscanf(line, "file %199s", arg) == 1) {
			printf("ok %zu\n", read_file(arg));
		} else if (sscanf(line, "threads %ld", &n) == 1) {
			for (long i = 0; i < n; i++) {
				pthread_t t;
				pthread_create(&t, 0, idle, 0);
				pthread_join(t, 0);
			}
			printf("ok 0\n");
		} else if (sscanf(line, "churn %ld", &n) == 1) {
			size_t a, b;
			churn(n, &a, &b);
			printf("ok %zu %zu\n", a, b);
		} else if (sscanf(line, "fork %ld", &n) == 1) {
			pid_t c = fork();
			if (c == 0) child_touch(n);
			if (c > 0) waitpid(c, 0, 0);
			printf("ok 0\n");
		} else if (sscanf(line, "exec %ld", &n) == 1) {
			for (long i = 0; i < n; i++) {
				pid_t c = fork();
				if (c == 0) {
					execl("/proc/self/exe", "grow_sites", "brk", (char *)0);
					_exit(127);
				}
				if (c > 0) waitpid(c, 0, 0);
			}
			printf("ok 0\n");
		} else if (strncmp(line, "trim", 4) == 0) {
			printf("ok %zu\n", trim());
		} else {
			printf("bye\n");
			break;
		}
	}
	return 0;
}
