/* Target for internal/maps tests: a main thread and three pthreads, each
 * with live malloc chunks (so each non-main thread gets its own arena
 * heap), all parked in a syscall once "ready" is written to stdout. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { nthreads = 3, nallocs = 300, chunk = 1000 };

static pthread_barrier_t allocated;
static void *keep[nthreads + 1][nallocs];

static void allocate(int slot) {
	for (int i = 0; i < nallocs; i++) {
		keep[slot][i] = malloc(chunk);
		if (keep[slot][i] == NULL)
			abort();
		memset(keep[slot][i], slot + 1, chunk);
	}
}

static void *worker(void *arg) {
	allocate((int)(long)arg);
	pthread_barrier_wait(&allocated);
	for (;;)
		pause();
	return NULL;
}

int main(void) {
	pthread_t t[nthreads];

	allocate(nthreads);
	pthread_barrier_init(&allocated, NULL, nthreads + 1);
	for (long i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
			abort();
	pthread_barrier_wait(&allocated);
	if (write(1, "ready\n", 6) != 6)
		abort();
	for (;;)
		pause();
}
