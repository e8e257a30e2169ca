/* A target for internal/ptrace's tests. It prints
 *   ready <add3> <slow> <block> <spin> <die> <buf> <worker-tid>
 * (addresses in hex) and answers "count" (SIGUSR1s handled so far) and
 * "quit" on stdin. "locker" starts a thread that takes a mutex, counts and
 * lets it go, over and over, and answers "<mutex> <counter>" (addresses in
 * hex: the mutex's first word is its low-level lock); "hog" makes that
 * thread keep the mutex until "unhog"; both answer "ok". The functions are what the tests inject: a plain call,
 * one that sleeps, one that blocks forever, one that runs for a while, and
 * one that ends its thread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t usr1;
static void on_usr1(int sig) { (void)sig; usr1++; }

char buf[256] = "hello from the target";

__attribute__((noinline)) long add3(long a, long b, long c) { return a + b + c; }

__attribute__((noinline)) long slow(void) {
	struct timespec ts = {0, 300 * 1000 * 1000};
	while (nanosleep(&ts, &ts)) {}
	return 42;
}

__attribute__((noinline)) long block(void) {
	for (;;) pause();
}

__attribute__((noinline)) long spin(long ms) {
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
	return ms;
}

__attribute__((noinline)) long die(void) {
	syscall(SYS_exit, 0); /* this thread only */
	return -1;
}

static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long locked_count;
static volatile int hog;
static void *locker(void *arg) {
	(void)arg;
	struct timespec ts = {0, 50 * 1000};
	for (;;) {
		pthread_mutex_lock(&lk);
		locked_count++;
		while (hog) nanosleep(&ts, NULL);
		pthread_mutex_unlock(&lk);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static volatile pid_t worker_tid;
static void *worker(void *arg) {
	(void)arg;
	worker_tid = gettid();
	for (;;) sleep(3600);
	return NULL;
}

int main(void) {
	struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t th;
	pthread_create(&th, NULL, worker, NULL);
	while (!worker_tid) usleep(1000);
	usleep(20000);
	printf("ready %lx %lx %lx %lx %lx %lx %d\n", (unsigned long)add3, (unsigned long)slow, (unsigned long)block,
	       (unsigned long)spin, (unsigned long)die, (unsigned long)buf, (int)worker_tid);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "count", 5)) {
			printf("%d\n", (int)usr1);
			fflush(stdout);
		} else if (!strncmp(line, "locker", 6)) {
			pthread_t lt;
			pthread_create(&lt, NULL, locker, NULL);
			printf("%lx %lx\n", (unsigned long)&lk, (unsigned long)&locked_count);
			fflush(stdout);
		} else if (!strncmp(line, "hog", 3)) {
			hog = 1;
			while (pthread_mutex_trylock(&lk) == 0) pthread_mutex_unlock(&lk); /* until the locker holds it */
			printf("ok\n");
			fflush(stdout);
		} else if (!strncmp(line, "unhog", 5)) {
			hog = 0;
			printf("ok\n");
			fflush(stdout);
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
	}
	printf("clean\n");
	return 0;
}
