/* The smallest target: it prints "ready" and waits on stdin for "quit".
 * Built static, with musl, or run under LD_PRELOAD=jemalloc for the
 * refusal tests. With the argument "write", its only thread instead blocks
 * forever writing to stderr (which the test never reads): a process with no
 * thread that is safe to borrow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
	char *keep = malloc(1000);
	memset(keep, 1, 1000);
	printf("ready\n");
	fflush(stdout);
	if (argc > 1 && !strcmp(argv[1], "write")) {
		static char junk[1 << 16];
		for (;;)
			if (write(2, junk, sizeof junk) < 0) return 1;
	}
	char line[64];
	while (fgets(line, sizeof line, stdin))
		if (!strncmp(line, "quit", 4)) break;
	printf("clean\n");
	return 0;
}
