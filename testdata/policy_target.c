/* A target whose threads sit in the states the hijack policy must tell
 * apart. It prints "ready" followed by one "NAME TID" pair per thread:
 *   sleeper  nanosleep in plain code                       -> safe
 *   handler  nanosleep inside a SIGUSR2 handler            -> refused
 *   condvar  futex on an application condition variable    -> safe
 *   stats    malloc_stats() blocked writing to a full pipe (stderr), holding
 *            main_arena's lock                               -> refused
 *   main     malloc() waiting for main_arena's lock        -> refused
 * stderr must be a pipe the test never reads. The process is killed at the
 * end: its main thread never comes back. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile pid_t tids[4];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void sleep_forever(void) {
	struct timespec ts = {3600, 0};
	for (;;) nanosleep(&ts, NULL);
}

static void *sleeper(void *a) { (void)a; tids[0] = gettid(); sleep_forever(); return NULL; }

static void on_usr2(int sig) { (void)sig; sleep_forever(); }
static void *handler(void *a) {
	(void)a;
	tids[1] = gettid();
	signal(SIGUSR2, on_usr2);
	raise(SIGUSR2);
	return NULL;
}

static void *condvar(void *a) {
	(void)a;
	tids[2] = gettid();
	pthread_mutex_lock(&mu);
	for (;;) pthread_cond_wait(&cv, &mu);
	return NULL;
}

static void *stats(void *a) {
	(void)a;
	tids[3] = gettid();
	static char junk[4096];
	int fl = fcntl(2, F_GETFL);
	fcntl(2, F_SETFL, fl | O_NONBLOCK);
	while (write(2, junk, sizeof junk) > 0) {}
	fcntl(2, F_SETFL, fl);
	malloc_stats();
	return NULL;
}

int main(void) {
	static char obuf[4096]; /* stdout must not malloc once main_arena is locked */
	setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
	/* volatile: gcc deletes a malloc/free pair whose pointer is unused */
	void *volatile first = malloc(10); /* the main thread now uses main_arena */
	free(first);
	void *(*fns[])(void *) = {sleeper, handler, condvar, stats};
	pthread_t th;
	for (int i = 0; i < 4; i++) {
		pthread_create(&th, NULL, fns[i], NULL);
		while (!tids[i]) usleep(1000);
	}
	usleep(100000);
	printf("ready sleeper %d handler %d condvar %d stats %d main %d\n", tids[0], tids[1], tids[2], tids[3], getpid());
	fflush(stdout);
	void *volatile p = malloc(5000); /* above tcache: takes main_arena's lock, held by stats */
	free(p);
	return 0;
}
