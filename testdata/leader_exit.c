/* A process whose main thread has called pthread_exit while its other
 * threads run on: the kernel then shows the main thread as a zombie, with
 * no memory behind /proc/PID/{mem,maps,exe}, though the process is alive.
 *
 * Three workers each keep blocks from their own arena (filled with a byte
 * of their own) and wait; one more thread answers commands on stdin:
 *   check  "ok" if every block still holds its byte, else "damaged"
 *   quit   prints "clean" (or "damaged") and exits
 * The main thread prints "ready" and then ends. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { nworkers = 3, nblocks = 200, size = 700 };

static unsigned char *blocks[nworkers + 1][nblocks];
static pthread_barrier_t filled;

static void fill(int slot) {
	for (int i = 0; i < nblocks; i++) {
		blocks[slot][i] = malloc(size + i);
		if (blocks[slot][i] == NULL)
			abort();
		memset(blocks[slot][i], slot + 1, size + i);
	}
	/* Some free chunks too, for trim and the free lists. */
	for (int i = 0; i < nblocks; i += 3) {
		free(blocks[slot][i]);
		blocks[slot][i] = NULL;
	}
}

static int intact(void) {
	for (int s = 0; s <= nworkers; s++)
		for (int i = 0; i < nblocks; i++)
			if (blocks[s][i] != NULL)
				for (int j = 0; j < size + i; j++)
					if (blocks[s][i][j] != s + 1)
						return 0;
	return 1;
}

static void *worker(void *arg) {
	fill((int)(long)arg);
	pthread_barrier_wait(&filled);
	for (;;)
		pause();
	return NULL;
}

static void *commands(void *arg) {
	(void)arg;
	char line[64];
	while (fgets(line, sizeof line, stdin) != NULL) {
		if (strncmp(line, "check", 5) == 0) {
			printf("%s\n", intact() ? "ok" : "damaged");
		} else if (strncmp(line, "quit", 4) == 0) {
			printf("%s\n", intact() ? "clean" : "damaged");
			fflush(stdout);
			exit(0);
		} else {
			printf("unknown\n");
		}
		fflush(stdout);
	}
	exit(0);
}

int main(void) {
	pthread_t t;
	fill(nworkers);
	pthread_barrier_init(&filled, NULL, nworkers + 1);
	for (long i = 0; i < nworkers; i++)
		if (pthread_create(&t, NULL, worker, (void *)i) != 0)
			abort();
	pthread_barrier_wait(&filled);
	if (pthread_create(&t, NULL, commands, NULL) != 0)
		abort();
	printf("ready\n");
	fflush(stdout);
	pthread_exit(NULL);
}
