/* A target for arenactl's tests of static cores read from memory alone:
 * a single-threaded program, to be linked with gcc -static, whose own data
 * holds a copy of main_arena, moved as if it lived there (every pointer
 * into the original points into the copy), so that two places in the
 * executable's writable data look like main_arena. Its empty bins point at
 * themselves and its ring closes on itself; only the chunks in its bins,
 * whose links lead back to the original, tell the copy apart.
 *
 * Argument: "empty" (every block is kept or sits in tcache and fastbins,
 * so no bin holds a chunk: nothing tells the copy apart) or "binned" (some
 * blocks freed into the unsorted and small bins).
 *
 * Commands on stdin: "crash PATH" writes malloc_info() to PATH, makes the
 * copy, prints "crashing" and dumps core (SIGABRT). It prints "ready" once
 * the heap is laid out. */
#define _GNU_SOURCE
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char __data_start[], _edata[];

/* Larger than main_arena in every glibc (0x898 bytes at most, 2.27+), and
 * in .data (initialised) like the original. */
static unsigned char copy[0x1000] __attribute__((aligned(64))) = {1};

static char info[1 << 16];

/* The original is the one object in .data whose next field (at 0x868,
 * 0x870 or 0x818 from its start, malloc_state in malloc/malloc.c) holds
 * its own address: a single-threaded program has no other arena. */
static int copy_arena(void) {
	static const size_t next[] = {0x870, 0x868, 0x818};
	for (size_t k = 0; k < sizeof next / sizeof next[0]; k++) {
		for (uintptr_t *p = (uintptr_t *)__data_start; (char *)(p + 1) <= _edata; p++) {
			uintptr_t base = (uintptr_t)p - next[k];
			if (*p != base || base < (uintptr_t)__data_start || base == (uintptr_t)copy)
				continue;
			size_t size = next[k] + 0x28;
			memcpy(copy, (void *)base, size);
			for (size_t i = 0; i < size; i += 8) {
				uintptr_t *w = (uintptr_t *)(copy + i);
				if (*w >= base && *w < base + size)
					*w = *w - base + (uintptr_t)copy;
			}
			return 0;
		}
	}
	return -1;
}

int main(int argc, char **argv) {
	int binned = argc > 1 && !strcmp(argv[1], "binned");
	static void *kept[400];
	for (int i = 0; i < 400; i++) {
		kept[i] = malloc(24 + (i % 40) * 48);
		memset(kept[i], 0x5a, 24);
	}
	if (binned)
		for (int i = 0; i < 400; i += 3) {
			free(kept[i]);
			kept[i] = NULL;
		}
	puts("ready");
	fflush(stdout);
	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strncmp(line, "crash ", 6))
			continue;
		int fd = open(line + 6, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		FILE *mem = fmemopen(info, sizeof info, "w");
		if (fd < 0 || !mem)
			return 1;
		setvbuf(mem, NULL, _IONBF, 0);
		malloc_info(0, mem);
		/* No allocation from here to the core: open and write do not. */
		if (copy_arena() < 0) {
			puts("no main_arena");
			return 1;
		}
		if (write(fd, info, strlen(info)) < 0)
			return 1;
		close(fd);
		printf("crashing %p\n", (void *)copy);
		fflush(stdout);
		signal(SIGABRT, SIG_DFL);
		raise(SIGABRT);
	}
	return 0;
}
