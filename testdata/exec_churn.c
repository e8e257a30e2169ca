/* A target that keeps replacing itself: each generation starts worker
 * threads that malloc, fill, check and free without pause, and one more
 * thread that execs the program again after a short random delay while the
 * workers run. With "exit" as the mode the generation exits instead of
 * exec'ing (the caller starts the next one); with "cmd" it execs when a
 * line arrives on stdin, once.
 *
 *   exec_churn MODE GENERATION
 *
 * Generation 0 prints "ready PID" (the line protocol of internal/testutil;
 * the pid for a test that starts it through a shell, so as not to be its
 * parent);
 * later ones print nothing, so that nobody has to read them. The
 * generation is in argv, where /proc/PID/cmdline shows it: a test that
 * sees it grow knows the program was never left stopped for long. A worker
 * that finds its own bytes changed aborts, which the test sees as the
 * process dying by SIGABRT. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { nworkers = 3 };

static const char *mode;
static long gen;

static void *worker(void *arg) {
	unsigned seed = (unsigned)(long)arg ^ (unsigned)getpid();
	for (;;) {
		size_t n = 16 + rand_r(&seed) % 4000;
		unsigned char c = (unsigned char)rand_r(&seed);
		unsigned char *p = malloc(n);
		if (p == NULL)
			abort();
		memset(p, c, n);
		for (size_t i = 0; i < n; i++)
			if (p[i] != c)
				abort();
		free(p);
	}
	return NULL;
}

static void *replacer(void *arg) {
	(void)arg;
	unsigned seed = (unsigned)getpid();
	struct timespec ts = {0, (long)(rand_r(&seed) % 20000) * 1000}; /* < 20 ms */
	if (strcmp(mode, "cmd") == 0) {
		char line[16];
		if (gen > 0 || fgets(line, sizeof line, stdin) == NULL)
			for (;;)
				pause();
	} else {
		nanosleep(&ts, NULL);
	}
	if (strcmp(mode, "exit") == 0)
		_exit(0);
	char next[32];
	snprintf(next, sizeof next, "%ld", gen + 1);
	char *argv[] = {"exec_churn", (char *)mode, next, NULL};
	execv("/proc/self/exe", argv);
	abort();
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: exec_churn exec|exit|cmd GENERATION\n");
		return 2;
	}
	mode = argv[1];
	gen = atol(argv[2]);
	/* Something on the heap that a reader can find in every generation. */
	void *keep[64];
	for (int i = 0; i < 64; i++)
		keep[i] = malloc(100 + i * 10);
	pthread_t t;
	for (long i = 0; i < nworkers; i++)
		if (pthread_create(&t, NULL, worker, (void *)i) != 0)
			abort();
	if (gen == 0) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
	}
	if (pthread_create(&t, NULL, replacer, NULL) != 0)
		abort();
	for (;;)
		pause();
	(void)keep;
}
