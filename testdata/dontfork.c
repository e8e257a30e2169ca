/* A target for heap's unread roots: BLOCKS malloc'd blocks whose only
 * pointers are kept in a page of anonymous memory marked MADV_DONTFORK
 * (as io_uring's rings are), which the kernel copies into no child, so
 * not into a copy-on-write image either; and, where the kernel has them
 * (MADV_GUARD_INSTALL, Linux 6.13), a guard page amid anonymous memory of
 * its own, which no access reaches and which holds nothing. It prints
 * "ready", then the page's address; "quit" answers "bye" and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCKS 4
#define PAGE 4096

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	void **keep = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (keep == MAP_FAILED || madvise(keep, PAGE, MADV_DONTFORK) != 0) {
		perror("dontfork");
		return 1;
	}
	char *guarded = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (guarded == MAP_FAILED) {
		perror("guarded");
		return 1;
	}
	memset(guarded, 0x44, 3 * PAGE);
	madvise(guarded + PAGE, PAGE, 102 /* MADV_GUARD_INSTALL; EINVAL before Linux 6.13 */);
	for (int i = 0; i < BLOCKS; i++) {
		char *volatile p = malloc(1000);
		memset(p, 0x33, 1000);
		keep[i] = p;
	}
	printf("ready\n");
	printf("%p\n", (void *)keep);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "quit", 4)) {
			printf("bye\n");
			return 0;
		}
	}
	return 0;
}
