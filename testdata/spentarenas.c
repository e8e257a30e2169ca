/* A target for the "arenas outlive their threads" diagnosis: NTHREADS
 * workers run at once, so glibc gives each its own arena, allocate a few
 * blocks each and hand them to the main thread, which keeps them all in
 * use. In "exit" mode the workers then end: their arenas stay (glibc
 * never frees an arena), each with its heap's 64 MiB reservation, while
 * one thread is left and almost nothing is free. In "stay" mode the
 * workers stay parked: one arena per live thread, glibc as designed.
 *
 * Arguments: exit|stay [NTHREADS (default 15)]. Prints "ready" once the
 * workers have ended (or are parked); stdin "quit" frees everything and
 * exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCKS 32
#define BLOCK 4096

static int nthreads = 15;
static int stay;
static pthread_barrier_t all_started, all_allocated;
static pthread_mutex_t park = PTHREAD_MUTEX_INITIALIZER;
static void **kept;
static int allocated;

static void *worker(void *arg)
{
	long idx = (long)arg;
	/* Every worker makes its first allocation while all of them live, so
	 * none can inherit an arena a finished worker left on the free list. */
	pthread_barrier_wait(&all_started);
	for (int i = 0; i < BLOCKS; i++) {
		void *p = malloc(BLOCK);
		memset(p, (int)idx + 1, BLOCK);
		kept[idx * BLOCKS + i] = p;
	}
	__atomic_add_fetch(&allocated, 1, __ATOMIC_SEQ_CST);
	pthread_barrier_wait(&all_allocated);
	if (stay) {
		pthread_mutex_lock(&park);
		pthread_mutex_unlock(&park);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "exit") && strcmp(argv[1], "stay"))) {
		fprintf(stderr, "usage: %s exit|stay [NTHREADS]\n", argv[0]);
		return 2;
	}
	stay = !strcmp(argv[1], "stay");
	if (argc > 2)
		nthreads = atoi(argv[2]);
	kept = calloc((size_t)nthreads * BLOCKS, sizeof *kept);
	pthread_t *th = calloc(nthreads, sizeof *th);
	pthread_barrier_init(&all_started, NULL, nthreads);
	pthread_barrier_init(&all_allocated, NULL, nthreads);
	pthread_mutex_lock(&park);
	for (long i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i)) {
			perror("pthread_create");
			return 1;
		}
	if (!stay)
		for (int i = 0; i < nthreads; i++)
			pthread_join(th[i], NULL);
	else
		while (__atomic_load_n(&allocated, __ATOMIC_SEQ_CST) < nthreads)
			usleep(1000);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin))
		if (!strncmp(line, "quit", 4))
			break;
	if (stay) {
		pthread_mutex_unlock(&park);
		for (int i = 0; i < nthreads; i++)
			pthread_join(th[i], NULL);
	}
	for (int i = 0; i < nthreads * BLOCKS; i++)
		free(kept[i]);
	free(kept);
	free(th);
	printf("bye\n");
	return 0;
}
