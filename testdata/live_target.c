/* A target for internal/live's tests of the freeze and borrow loops.
 *
 * The main thread reads commands on stdin (blocked in read). Four workers
 * each block in another syscall of the safe list, and count their wake-ups:
 *   W0 nanosleep, woken by SIGUSR1 (a handler without SA_RESTART)
 *   W1 poll on a pipe, woken by a byte written to it
 *   W2 futex on an application condition variable, woken by a signal on it
 *   W3 rt_sigtimedwait (sigwaitinfo) for SIGUSR2, blocked everywhere else
 * With the argument "spawn", a fifth thread creates short-lived threads
 * without pause (four at a time, each allocating, freeing and exiting, then
 * joined), and counts them.
 *
 * It prints, once every thread is in place:
 *   ready TABLE TEXT PAGES NPAGES SPAWNED
 * (addresses in hex): TABLE is struct { long tid; unsigned long self; }[6]
 * (main, W0..W3, the spawner or zeros), self being pthread_self(), which is
 * the thread pointer (fs_base) on x86_64; TEXT is the string "12345";
 * PAGES is NPAGES private anonymous pages, without huge pages, of which the
 * first quarter are written, the second quarter read (the zero page) and
 * the rest never touched; SPAWNED is the spawner's count (a long).
 *
 * Commands (one line each, one answer line each):
 *   round    wake every worker until each has counted one more wake-up:
 *            "ok", or "stuck W<i>" after 60 s (a hang guard, not a timing)
 *   drop     madvise(MADV_DONTNEED) the first half of the written pages: "ok"
 *   quit     a last round, then "clean" and exit 0 ("stuck W<i>", exit 3)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NWORKERS 4
#define NPAGES 64

struct slot {
	long tid;
	unsigned long self;
};

struct slot table[NWORKERS + 2];
const char text[] = "12345";
volatile long spawned;

static volatile long count[NWORKERS];
static pthread_t th[NWORKERS];
static int wake_pipe[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long generation;

static void on_usr1(int sig) { (void)sig; }

static void record(int i) {
	table[i].self = (unsigned long)pthread_self();
	__atomic_store_n(&table[i].tid, (long)gettid(), __ATOMIC_RELEASE);
}

static void *w_nanosleep(void *a) {
	(void)a;
	record(1);
	for (;;) {
		struct timespec ts = {3600, 0};
		if (nanosleep(&ts, NULL) && errno == EINTR) count[0]++;
	}
	return NULL;
}

static void *w_poll(void *a) {
	(void)a;
	record(2);
	struct pollfd pfd = {wake_pipe[0], POLLIN, 0};
	char c;
	for (;;)
		if (poll(&pfd, 1, -1) == 1 && read(wake_pipe[0], &c, 1) == 1) count[1]++;
	return NULL;
}

static void *w_condvar(void *a) {
	(void)a;
	record(3);
	pthread_mutex_lock(&mu);
	long seen = generation;
	for (;;) {
		while (seen == generation) pthread_cond_wait(&cv, &mu);
		seen = generation;
		count[2]++;
	}
	return NULL;
}

static void *w_sigwait(void *a) {
	(void)a;
	record(4);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	for (;;)
		if (sigwaitinfo(&set, NULL) == SIGUSR2) count[3]++;
	return NULL;
}

static void *shortlived(void *a) {
	(void)a;
	void *volatile p = malloc(100);
	free(p);
	return NULL;
}

static void *spawner(void *a) {
	(void)a;
	record(5);
	for (;;) {
		pthread_t t[4];
		int n = 0;
		for (int i = 0; i < 4; i++)
			if (pthread_create(&t[n], NULL, shortlived, NULL) == 0) n++;
		for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
		spawned += n;
		if (n == 0) usleep(1000); /* out of threads for now */
	}
	return NULL;
}

static void wake(int i) {
	switch (i) {
	case 0:
		pthread_kill(th[0], SIGUSR1);
		break;
	case 1:
		if (write(wake_pipe[1], "x", 1) != 1) abort();
		break;
	case 2:
		pthread_mutex_lock(&mu);
		generation++;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
		break;
	case 3:
		pthread_kill(th[3], SIGUSR2);
		break;
	}
}

/* round returns -1 when every worker counted a wake-up, else the first one
 * that did not within 60 s. W0 is woken again and again: a signal that
 * lands just before it enters nanosleep is lost. The others keep theirs
 * (pipe, generation, pending signal), so they are woken once. */
static int round_(void) {
	long before[NWORKERS];
	for (int i = 0; i < NWORKERS; i++) {
		before[i] = count[i];
		wake(i);
	}
	for (int i = 0; i < NWORKERS; i++) {
		for (int ms = 0; count[i] == before[i]; ms++) {
			if (ms == 60000) return i;
			if (i == 0) wake(0);
			usleep(1000);
		}
	}
	return -1;
}

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sigaction sa = {.sa_handler = on_usr1}; /* no SA_RESTART */
	sigaction(SIGUSR1, &sa, NULL);
	sigset_t usr2;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &usr2, NULL); /* inherited by every thread */
	if (pipe(wake_pipe)) return 2;

	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *pages = mmap(NULL, NPAGES * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pages == MAP_FAILED) return 2;
	madvise(pages, NPAGES * pg, MADV_NOHUGEPAGE); /* one page per write fault */
	for (long i = 0; i < NPAGES / 4; i++) pages[i * pg] = 1;
	volatile unsigned char sum = 0;
	for (long i = NPAGES / 4; i < NPAGES / 2; i++) sum += pages[i * pg];

	record(0);
	void *(*fns[NWORKERS])(void *) = {w_nanosleep, w_poll, w_condvar, w_sigwait};
	for (int i = 0; i < NWORKERS; i++) {
		if (pthread_create(&th[i], NULL, fns[i], NULL)) return 2;
		while (!__atomic_load_n(&table[i + 1].tid, __ATOMIC_ACQUIRE)) usleep(1000);
	}
	if (argc > 1 && !strcmp(argv[1], "spawn")) {
		pthread_t sp;
		if (pthread_create(&sp, NULL, spawner, NULL)) return 2;
		while (!__atomic_load_n(&table[5].tid, __ATOMIC_ACQUIRE)) usleep(1000);
	}
	/* Every worker in its syscall: one round proves it got there. */
	if (round_() >= 0) return 2;
	printf("ready %lx %lx %lx %d %lx\n", (unsigned long)table, (unsigned long)text, (unsigned long)pages, NPAGES,
	       (unsigned long)&spawned);

	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "round")) {
			int w = round_();
			if (w < 0)
				printf("ok\n");
			else
				printf("stuck W%d\n", w);
		} else if (!strcmp(line, "drop")) {
			printf(madvise(pages, NPAGES / 8 * pg, MADV_DONTNEED) ? "error\n" : "ok\n");
		} else if (!strcmp(line, "quit")) {
			break;
		} else {
			printf("unknown\n");
		}
	}
	int w = round_();
	if (w >= 0) {
		printf("stuck W%d\n", w);
		return 3;
	}
	printf("clean\n");
	return 0;
}
