/* A target for arenactl's tests: worker threads on their own arenas with a
 * fragmented heap, then either parked in different blocking syscalls
 * ("park"), hammering malloc/free ("hammer"), or spinning in user code
 * ("busy", single-threaded). "stall" parks them and adds a thread that
 * holds main_arena's lock indefinitely: it calls malloc_stats(), which
 * prints under the arena lock, with stderr a pipe nobody reads (yet). It keeps every block it did not free filled
 * with a known pattern and checks them on "check" and at exit, so any heap
 * damage done by a tracer shows up as a non-zero exit status.
 *
 * Commands on stdin (one per line), answered on stdout:
 *   report PATH   write malloc_info() to PATH, from the main thread, through
 *                 the same fmemopen+setvbuf(_IONBF) stream arenactl uses
 *   freeze PATH   write malloc_info() to PATH, then stop the whole process
 *                 (SIGSTOP) before anything else can allocate; after
 *                 SIGCONT it closes its stream and answers "ok". The heap a
 *                 reader sees while it is stopped is the one the XML shows.
 *   crash PATH    as freeze, but then the process dumps core (SIGABRT)
 *                 instead of stopping; it first prints "crashing ADDR", ADDR
 *                 being where the XML is in its memory
 *   check         verify every kept block: "ok" or "corrupt"
 *   quit          stop the workers, verify, free everything, exit 0 (3 if damaged)
 * It prints "ready" once the heap is laid out and every worker is parked.
 *
 * Arguments: MODE [THREADS [BLOCKS]]; BLOCKS (default and at most 4200) is
 * how many blocks each thread lays out, so that a small BLOCKS makes a small
 * heap (scripts/make-core-fixtures.sh uses it for compact cores). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#define KEEP 4200

struct worker {
	pthread_t th;
	int idx;
	void *kept[KEEP];
	size_t size[KEEP];
	int nkept;
	volatile long progress;
};

static int nthreads = 4;
static int nblocks = KEEP;
static const char *mode = "park";
static struct worker *workers;
static volatile int stopping;
static int wake_pipe[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t laid_out;
static volatile int corrupt;

static unsigned char pattern(void *p, size_t i) { return (unsigned char)(((uintptr_t)p >> 4) + i * 7); }

static void fill(void *p, size_t n) {
	unsigned char *b = p;
	for (size_t i = 0; i < n; i++) b[i] = pattern(p, i);
}

static int verify(void *p, size_t n) {
	unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != pattern(p, i)) return 0;
	return 1;
}

static unsigned rnd(unsigned *s) { *s = *s * 1103515245u + 12345u; return *s >> 8; }

/* Sizes across fastbins, small bins, large bins and an mmapped chunk; every
 * second block is freed so the free lists fill up between kept blocks. */
static void lay_out(struct worker *w) {
	unsigned seed = 1234 + w->idx;
	static const size_t sizes[] = {24, 40, 56, 72, 100, 200, 500, 1000, 1500, 3000, 9000, 40000};
	void *tmp[KEEP];
	int n = 0;
	for (int i = 0; i < nblocks; i++) {
		size_t sz = sizes[rnd(&seed) % (sizeof sizes / sizeof *sizes)];
		void *p = malloc(sz);
		if (!p) abort();
		fill(p, sz);
		if (i % 2) {
			tmp[n++] = p;
		} else {
			w->kept[w->nkept] = p;
			w->size[w->nkept++] = sz;
		}
	}
	for (int i = 0; i < n; i++) free(tmp[i]);
	void *big = malloc(300000 + w->idx); /* above the mmap threshold */
	fill(big, 300000 + w->idx);
	w->kept[w->nkept] = big;
	w->size[w->nkept++] = 300000 + w->idx;
	/* Last, small frees beyond what the tcache holds: they stay in fastbins,
	 * since no larger request follows to consolidate them. Kept blocks in
	 * between stop them from merging on the way out. */
	void *small[3][24];
	for (int i = 0; i < 24; i++)
		for (int k = 0; k < 3; k++) {
			small[k][i] = malloc(24 + 32 * k);
			void *keep = malloc(16);
			fill(keep, 16);
			w->kept[w->nkept] = keep;
			w->size[w->nkept++] = 16;
		}
	for (int i = 0; i < 24; i++)
		for (int k = 0; k < 3; k++) free(small[k][i]);
}

static void park(struct worker *w) {
	switch (w->idx % 5) {
	case 0: { /* nanosleep */
		struct timespec ts = {3600, 0};
		while (!stopping) nanosleep(&ts, NULL);
		break;
	}
	case 1: { /* poll on the wake pipe */
		struct pollfd pfd = {wake_pipe[0], POLLIN, 0};
		while (!stopping) poll(&pfd, 1, -1);
		break;
	}
	case 2: { /* futex on an application condition variable */
		pthread_mutex_lock(&mu);
		while (!stopping) pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
		break;
	}
	case 3: { /* epoll_wait */
		int ep = epoll_create1(0);
		struct epoll_event ev = {.events = EPOLLIN};
		epoll_ctl(ep, EPOLL_CTL_ADD, wake_pipe[0], &ev);
		struct epoll_event out;
		while (!stopping) epoll_wait(ep, &out, 1, -1);
		close(ep);
		break;
	}
	default: { /* select */
		while (!stopping) {
			fd_set r;
			FD_ZERO(&r);
			FD_SET(wake_pipe[0], &r);
			select(wake_pipe[0] + 1, &r, NULL, NULL, NULL);
		}
	}
	}
}

/* malloc/free without pause, checking the blocks it keeps. */
static void hammer(struct worker *w) {
	unsigned seed = 99 + w->idx;
	void *slot[64] = {0};
	size_t ssz[64] = {0};
	while (!stopping) {
		int i = rnd(&seed) % 64;
		if (slot[i]) {
			if (!verify(slot[i], ssz[i])) corrupt = 1;
			free(slot[i]);
		}
		size_t sz = 16 + rnd(&seed) % (rnd(&seed) % 16 == 0 ? 200000 : 2000);
		slot[i] = malloc(sz);
		if (!slot[i]) abort();
		ssz[i] = sz;
		fill(slot[i], sz);
		w->progress++;
	}
	for (int i = 0; i < 64; i++)
		if (slot[i]) {
			if (!verify(slot[i], ssz[i])) corrupt = 1;
			free(slot[i]);
		}
}

static void *run(void *arg) {
	struct worker *w = arg;
	lay_out(w);
	pthread_barrier_wait(&laid_out);
	if (!strcmp(mode, "hammer"))
		hammer(w);
	else
		park(w);
	return NULL;
}

static int check_all(void) {
	for (int t = 0; t < nthreads; t++)
		for (int i = 0; i < workers[t].nkept; i++)
			if (!verify(workers[t].kept[i], workers[t].size[i])) return 0;
	return !corrupt;
}

static int report(const char *path) {
	size_t size = 16 << 20;
	char *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) return -1;
	FILE *fp = fmemopen(buf, size, "w");
	if (!fp) return -1;
	setvbuf(fp, NULL, _IONBF, 0);
	malloc_info(0, fp);
	fclose(fp);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) return -1;
	size_t len = strlen(buf);
	int ok = write(fd, buf, len) == (ssize_t)len;
	close(fd);
	munmap(buf, size);
	return ok ? 0 : -1;
}

/* Fill stderr's pipe, then let malloc_stats block in write holding the lock. */
static void *stall(void *arg) {
	(void)arg;
	static char junk[4096];
	int fl = fcntl(2, F_GETFL);
	fcntl(2, F_SETFL, fl | O_NONBLOCK);
	while (write(2, junk, sizeof junk) > 0) {}
	fcntl(2, F_SETFL, fl);
	malloc_stats();
	return NULL;
}

static int verify_main(struct worker *w) {
	for (int i = 0; i < w->nkept; i++)
		if (!verify(w->kept[i], w->size[i])) return 0;
	return 1;
}

static char freeze_buf[16 << 20];

static int freeze(const char *path, int crash) {
	char *buf = freeze_buf;
	FILE *fp = fmemopen(buf, sizeof freeze_buf, "w");
	if (!fp) return -1;
	setvbuf(fp, NULL, _IONBF, 0);
	malloc_info(0, fp);
	/* No allocation from here until SIGCONT: open/write/close do not allocate. */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) return -1;
	size_t len = strlen(buf);
	int ok = write(fd, buf, len) == (ssize_t)len;
	close(fd);
	if (crash) {
		printf("crashing %p\n", (void *)buf);
		fflush(stdout);
		signal(SIGABRT, SIG_DFL);
		raise(SIGABRT);
	}
	raise(SIGSTOP);
	fclose(fp);
	return ok ? 0 : -1;
}

static void stop_workers(void) {
	stopping = 1;
	pthread_mutex_lock(&mu);
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < nthreads; i++) {
		if (write(wake_pipe[1], "x", 1) < 0) {}
		pthread_kill(workers[i].th, SIGUSR1);
	}
	for (int i = 0; i < nthreads; i++) pthread_join(workers[i].th, NULL);
}

static void on_usr1(int sig) { (void)sig; }

static volatile sig_atomic_t term;
static void on_term(int sig) { (void)sig; term = 1; }

/* Single-threaded, spinning in user code; SIGTERM ends it after a check. */
static int busy(void) {
	struct worker w = {.idx = 0};
	lay_out(&w);
	signal(SIGTERM, on_term);
	printf("ready\n");
	fflush(stdout);
	volatile unsigned long x = 0;
	while (!term) x = x * 31 + 7;
	for (int i = 0; i < w.nkept; i++)
		if (!verify(w.kept[i], w.size[i])) return 3;
	return 0;
}

int main(int argc, char **argv) {
	if (argc > 1) mode = argv[1];
	if (argc > 2) nthreads = atoi(argv[2]);
	if (argc > 3) nblocks = atoi(argv[3]);
	if (nblocks < 0 || nblocks > KEEP) nblocks = KEEP;
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* stdin's buffer is not malloc'd at the first fgets: in "stall" mode
	 * that malloc would wait on the lock malloc_stats holds, and the main
	 * thread, which the tests borrow, would not be parked in read. */
	static char inbuf[4096];
	setvbuf(stdin, inbuf, _IOFBF, sizeof inbuf);
	if (!strcmp(mode, "busy")) return busy();

	struct sigaction sa = {.sa_handler = on_usr1};
	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART: wakes parked workers */
	if (pipe(wake_pipe)) return 2;
	fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK);
	workers = calloc(nthreads, sizeof *workers);
	struct worker mainw = {.idx = 100};
	lay_out(&mainw);
	pthread_barrier_init(&laid_out, NULL, nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		workers[i].idx = i;
		pthread_create(&workers[i].th, NULL, run, &workers[i]);
	}
	pthread_barrier_wait(&laid_out);
	/* Give parked workers time to reach their syscall. */
	usleep(50000);
	printf("ready\n");
	if (!strcmp(mode, "stall")) {
		pthread_t st;
		pthread_create(&st, NULL, stall, NULL);
		pthread_detach(st);
	}

	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "freeze ", 7)) {
			printf(freeze(line + 7, 0) ? "error\n" : "ok\n");
		} else if (!strncmp(line, "crash ", 6)) {
			printf(freeze(line + 6, 1) ? "error\n" : "ok\n");
		} else if (!strncmp(line, "report ", 7)) {
			printf(report(line + 7) ? "error\n" : "ok\n");
		} else if (!strcmp(line, "check")) {
			printf(check_all() && verify_main(&mainw) ? "ok\n" : "corrupt\n");
		} else if (!strcmp(line, "quit")) {
			break;
		}
	}
	stop_workers();
	int ok = check_all() && verify_main(&mainw);
	for (int t = 0; t < nthreads; t++)
		for (int i = 0; i < workers[t].nkept; i++) free(workers[t].kept[i]);
	printf(ok ? "clean\n" : "corrupt\n");
	return ok ? 0 : 3;
}
