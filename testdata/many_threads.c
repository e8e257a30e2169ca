/* A process with many threads, all parked in pause() after each allocated
 * a block from its arena: for checks of what arenactl does per thread.
 *
 *   many_threads N      (N threads besides the main one)
 *
 * It prints "ready" once every thread is parked, then answers on stdin:
 *   quit   prints "clean" and exits */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t started;

static void *worker(void *arg) {
	void *p = malloc(64 + (long)arg % 512);
	if (p == NULL)
		abort();
	memset(p, 1, 64);
	pthread_barrier_wait(&started);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 12;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	pthread_barrier_init(&started, NULL, n + 1);
	for (long i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, worker, (void *)i) != 0)
			abort();
	}
	pthread_barrier_wait(&started);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin) != NULL)
		if (strncmp(line, "quit", 4) == 0) {
			printf("clean\n");
			fflush(stdout);
			return 0;
		}
	return 0;
}
