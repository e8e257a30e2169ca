/* A program that uses fixedlib.c's library (loaded at a fixed address),
 * for arenactl's tests of cores without NT_FILE. It prints "ready"; on
 * "crash PATH" it writes malloc_info() to PATH, prints "crashing" and dumps
 * core (SIGABRT). */
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fixed_get(void);

static char info[1 << 16];

int main(void) {
	static void *kept[64];
	for (int i = 0; i < 64; i++)
		kept[i] = malloc(16 + 32 * i + fixed_get());
	for (int i = 0; i < 64; i += 2)
		free(kept[i]);
	printf("ready\n");
	fflush(stdout);
	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strncmp(line, "crash ", 6))
			continue;
		/* Through a stream that allocates nothing while malloc_info
		 * prints, and open/write, which do not either: the heap in the
		 * core is the one the XML shows. */
		int fd = open(line + 6, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		FILE *mem = fmemopen(info, sizeof info, "w");
		if (fd < 0 || !mem)
			return 1;
		setvbuf(mem, NULL, _IONBF, 0);
		malloc_info(0, mem);
		if (write(fd, info, strlen(info)) < 0)
			return 1;
		close(fd);
		printf("crashing\n");
		fflush(stdout);
		signal(SIGABRT, SIG_DFL);
		raise(SIGABRT);
	}
	return 0;
}
