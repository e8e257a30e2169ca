/* A target whose heap every view of it (live, snapshot, snapshot --full,
 * gdb's gcore) must describe alike, with its own count of the truth.
 *
 * The main thread mallocs 200 KiB, above the mmap threshold: glibc maps it
 * of its own (malloc/malloc.c, sysmalloc_mmap). Then 300 KiB aligned to
 * 64 KiB by memalign, also mapped of its own, the chunk moved into its
 * region by the alignment (a second header, whose prev_size is the lead),
 * and, first of all, another such block grown by realloc to 600 KiB
 * (mremap_chunk: the second header says the new size, the first still the
 * old).
 * Then 220 KiB it loses: no pointer to it is kept (its address is kept
 * masked, as the truth). It then maps plain anonymous memory (256 KiB, or
 * the KiB its argument says) right below them. The kernel places each
 * chunk right below the last and merges them all: one rw-p mapping, the
 * chunks in its upper part at page boundaries, not at the mapping's
 * start. It writes into all of it, so that its pages hold data, and checks
 * in /proc/self/maps that it is one mapping. Past 32 MiB, the mapping is
 * big enough for a copy-on-write image to consider leaving it out.
 *
 * Four threads each malloc one small block (their first malloc also makes
 * their tcache, a chunk reached only from glibc's `tcache` thread variable
 * in libc's static TLS) and keep it in a thread variable of this program's
 * own, then park.
 *
 * It prints "ready" once all is in place. To "truth" it answers, then
 * "end"; to "quit" (or EOF), "bye", and exits 0:
 *   mmapped ADDR SIZE   the big block's user address and chunk size
 *   aligned ADDR SIZE   the same of the memalign'd block
 *   realigned ADDR SIZE the same of the memalign'd block grown by realloc
 *   leaked ADDR SIZE    the same of the lost block
 *   nmmaps N BYTES      malloc's own count of mmapped chunks and of their
 *                       bytes (mallinfo: mp_.n_mmaps, mp_.mmapped_mem)
 *   glibc VERSION       gnu_get_libc_version()
 *   merged LO HI        the one mapping that holds the chunk and the memory
 *                       mapped below it ("notmerged LO HI" if it is not one)
 *   thread TID ADDR     a worker and its block
 * Once it has answered "truth" it allocates and frees nothing more. */
#define _GNU_SOURCE
/* mallinfo, not mallinfo2 (2.33+): it builds against every glibc tree the
 * tests run, and the counts here fit an int. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NTHREADS 4

void *volatile g_big;   /* the mmapped chunk, reached from static data */
void *volatile g_aligned, *volatile g_realigned;
void *volatile g_plain; /* the memory mapped after it */
static __thread void *volatile mine;
static pthread_barrier_t parked;
static pid_t tids[NTHREADS];
static void *blocks[NTHREADS];
static const uintptr_t mask = 0x5a5a5a5a5a5a5a5aull;
static uintptr_t leak_masked;
static size_t leak_size;

/* Out of line, so that no pointer to the lost block stays in main's
 * frame; scrub then clears the stack below it. */
__attribute__((noinline)) static void lose(void) {
	char *p = malloc(220 << 10);
	if (!p) abort();
	memset(p, 'l', 220 << 10);
	size_t *volatile head = (size_t *)p - 1; /* the chunk's size word */
	leak_size = *head & ~(size_t)7;
	leak_masked = (uintptr_t)p ^ mask;
}

__attribute__((noinline)) static void scrub(void) {
	volatile char pad[16 << 10];
	memset((char *)pad, 0, sizeof pad);
}

/* mapping_of finds the mapping that holds addr in /proc/self/maps, read
 * with read(2) into static memory: a FILE would be malloc'd and freed into
 * the tcache, which a core read without libc's file cannot tell from
 * chunks in use. */
static int mapping_of(uintptr_t addr, unsigned long *lo, unsigned long *hi) {
	static char maps[1 << 16];
	int fd = open("/proc/self/maps", O_RDONLY);
	if (fd < 0) return 0;
	size_t n = 0;
	for (ssize_t r; n < sizeof maps - 1 && (r = read(fd, maps + n, sizeof maps - 1 - n)) > 0;) n += (size_t)r;
	close(fd);
	maps[n] = 0;
	for (char *l = maps; l && l < maps + n; l = strchr(l, '\n'), l = l ? l + 1 : l)
		if (sscanf(l, "%lx-%lx", lo, hi) == 2 && *lo <= addr && addr < *hi) return 1;
	return 0;
}

static void *worker(void *arg) {
	int i = (int)(long)arg;
	mine = malloc(100);
	memset(mine, 'w', 100);
	blocks[i] = mine;
	tids[i] = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&parked);
	for (;;) pause();
	return NULL;
}

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IONBF, 0);
	size_t big = 200 << 10, plain = (argc > 1 ? (size_t)atol(argv[1]) : 256) << 10;
	/* First the block realloc grows: mremap moves its region right below
	 * where it was (a mapping of its own: a moved one keeps the page
	 * offset it had, and merges with nothing), and the hole it leaves is
	 * filled with plain memory, so that the next regions go on below it and
	 * merge. */
	void *r = memalign(64 << 10, 300 << 10);
	if (!r) return 2;
	memset(r, 'r', 300 << 10);
	size_t pad = ((size_t *)r)[-2], rsize = ((size_t *)r)[-1] & ~(size_t)7;
	volatile uintptr_t before = (uintptr_t)r; /* only compared after the realloc */
	uintptr_t old = before - 16 - pad;
	g_realigned = realloc((void *)before, 600 << 10);
	if (!g_realigned) return 2;
	memset(g_realigned, 'R', 600 << 10);
	if ((uintptr_t)g_realigned != before) {
		void *fill = mmap((void *)old, pad + rsize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (fill != MAP_FAILED) memset(fill, 'f', pad + rsize);
	}
	g_big = malloc(big);
	if (!g_big) return 2;
	memset(g_big, 'b', big);
	g_aligned = memalign(64 << 10, 300 << 10);
	if (!g_aligned) return 2;
	memset(g_aligned, 'a', 300 << 10);
	lose();
	scrub();
	/* Right below the chunks: a mapping of 2 MiB or more the kernel would
	 * align to a huge page, away from them. */
	unsigned long lo = 0, hi = 0;
	if (!mapping_of(leak_masked ^ mask, &lo, &hi)) return 2;
	g_plain = mmap((void *)(lo - plain), plain, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (g_plain == MAP_FAILED) g_plain = mmap(NULL, plain, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g_plain == MAP_FAILED) return 2;
	memset(g_plain, 'p', plain);

	uintptr_t chunk = (uintptr_t)g_big - 16;
	size_t csize = ((size_t *)g_big)[-1] & ~(size_t)7;
	size_t asize = ((size_t *)g_aligned)[-1] & ~(size_t)7;
	rsize = ((size_t *)g_realigned)[-1] & ~(size_t)7;
	struct mallinfo mi = mallinfo();
	int merged = mapping_of(chunk, &lo, &hi) && lo <= (uintptr_t)g_plain && (uintptr_t)g_plain < hi &&
		     lo <= (leak_masked ^ mask) && lo <= (uintptr_t)g_aligned;

	pthread_barrier_init(&parked, NULL, NTHREADS + 1);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_t th;
		if (pthread_create(&th, NULL, worker, (void *)(long)i)) return 2;
	}
	pthread_barrier_wait(&parked);
	printf("ready\n");

	char in[64];
	while (fgets(in, sizeof in, stdin)) {
		if (strstr(in, "quit")) break;
		if (!strstr(in, "truth")) continue;
		printf("mmapped %#lx %zu\n", (unsigned long)(uintptr_t)g_big, csize);
		printf("aligned %#lx %zu\n", (unsigned long)(uintptr_t)g_aligned, asize);
		printf("realigned %#lx %zu\n", (unsigned long)(uintptr_t)g_realigned, rsize);
		printf("leaked %#lx %zu\n", (unsigned long)(leak_masked ^ mask), leak_size);
		printf("nmmaps %d %d\n", mi.hblks, mi.hblkhd);
		printf("glibc %s\n", gnu_get_libc_version());
		printf("%s %#lx %#lx\n", merged ? "merged" : "notmerged", lo, hi);
		for (int i = 0; i < NTHREADS; i++) printf("thread %d %#lx\n", (int)tids[i], (unsigned long)(uintptr_t)blocks[i]);
		printf("end\n");
	}
	printf("bye\n");
	_exit(0);
}
