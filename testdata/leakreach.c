/* A target for leaks' split of what is held into leaked and reachable. On
 * "go" it allocates BLOCKS blocks of 64 KiB at each of two sites: keep_site
 * stores every pointer in a global array (held, reachable), lose_site drops
 * every one (leaked: nothing points to it). Answers "ok". "quit" answers
 * "bye" and exits. It prints "ready" first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCKS 64
#define SIZE (64 << 10)

void *kept[BLOCKS];

__attribute__((noinline)) void keep_site(int i) {
	kept[i] = malloc(SIZE);
	memset(kept[i], 0x11, 64);
}

__attribute__((noinline)) void lose_site(void) {
	char *volatile p = malloc(SIZE);
	memset(p, 0x22, 64);
}

/* Scrubs the stack below the caller, where lose_site's frames were. */
__attribute__((noinline)) static void scrub(void) {
	volatile char buf[8192];
	memset((char *)buf, 0, sizeof buf);
}

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "go", 2)) {
			for (int i = 0; i < BLOCKS; i++) {
				keep_site(i);
				lose_site();
			}
			scrub();
			printf("ok\n");
		} else if (!strncmp(line, "quit", 4)) {
			printf("bye\n");
			return 0;
		}
	}
	return 0;
}
