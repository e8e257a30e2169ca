/* A target whose debug info names a file it has no business showing: a
 * #line directive puts the leaking function in SECRET_FILE (defined on the
 * command line; the test writes it, readable by root alone). Anyone who
 * can run a program can write such a line, so what arenactl serves of the
 * profile (leaks --http) must never open the files it names.
 *
 * A thread keeps 4000-byte blocks, one every ms, from secret_leak(). It
 * prints "ready", and "bye" at "quit", then exits. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *kept[1 << 16]; /* exported: the stores are not dead */
void *secret_leak(size_t n);

static void *loop(void *arg) {
	(void)arg;
	for (unsigned i = 0;; i++) {
		kept[i & ((1 << 16) - 1)] = secret_leak(4000);
		usleep(1000);
	}
	return NULL;
}

int main(void) {
	pthread_t t;
	pthread_create(&t, NULL, loop, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	char line[64];
	while (fgets(line, sizeof line, stdin))
		if (!strncmp(line, "quit", 4)) {
			printf("bye\n");
			break;
		}
	return 0;
}

#line 1 SECRET_FILE
__attribute__((noinline)) void *secret_leak(size_t n) {
	void *p = malloc(n);
	memset(p, 1, 16);
	return p;
}
