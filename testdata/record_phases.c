// A self-describing target for arenactl record: after "go" on stdin it
// runs through phases, each a quick change then a plateau of PLATEAU_MS:
//   1 site_a grows to 48 MiB (64 KiB blocks, in the main heap)
//   2 site_b grows to 32 MiB (48 KiB blocks)
//   3 site_c: 16 blocks of 1 MiB, each mmapped on its own (before A's
//     are freed: a free chunk that fits is used before any mmap)
//   4 site_a's blocks are freed: free but resident (M_TRIM_THRESHOLD is
//     huge, so free() gives nothing back)
//   5 malloc_trim(0): the free pages go back to the system
// then it exits (or, with "hold" as argv[2], waits for "quit").
// A logger thread writes the truth every 20 ms to argv[1]:
//   T_NS PHASE HELD_A HELD_B HELD_C
// T_NS on CLOCK_REALTIME; HELD_* the bytes each site holds (requested).
// Every block is written to, so that it is resident.
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define A_BLOCK (64 << 10)
#define A_COUNT 768 /* 48 MiB */
#define B_BLOCK (48 << 10)
#define B_COUNT 682 /* 32 MiB */
#define C_BLOCK (1 << 20)
#define C_COUNT 16

static _Atomic long held_a, held_b, held_c;
static _Atomic int phase, done;
static FILE *truth;
static int plateau_ms = 1500;

static long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void sleep_ms(int ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void *logger(void *arg) {
	(void)arg;
	while (!atomic_load(&done)) {
		fprintf(truth, "%ld %d %ld %ld %ld\n", now_ns(), atomic_load(&phase), atomic_load(&held_a), atomic_load(&held_b),
		        atomic_load(&held_c));
		fflush(truth);
		sleep_ms(20);
	}
	return NULL;
}

__attribute__((noinline)) static void *site_a(void) {
	void *p = malloc(A_BLOCK);
	memset(p, 1, A_BLOCK);
	return p;
}

__attribute__((noinline)) static void *site_b(void) {
	void *p = malloc(B_BLOCK);
	memset(p, 2, B_BLOCK);
	return p;
}

__attribute__((noinline)) static void *site_c(void) {
	void *p = malloc(C_BLOCK);
	memset(p, 3, C_BLOCK);
	return p;
}

static void *as[A_COUNT], *bs[B_COUNT], *cs[C_COUNT];

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: record_phases TRUTH [hold]\n");
		return 2;
	}
	const char *p = getenv("PLATEAU_MS");
	if (p)
		plateau_ms = atoi(p);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	mallopt(M_MMAP_THRESHOLD, 512 << 10);
	truth = fopen(argv[1], "w");
	if (!truth)
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_t th;
	pthread_create(&th, NULL, logger, NULL);
	printf("ready %d\n", getpid());
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	atomic_store(&phase, 1);
	for (int i = 0; i < A_COUNT; i++) {
		as[i] = site_a();
		atomic_fetch_add(&held_a, A_BLOCK);
	}
	sleep_ms(plateau_ms);
	atomic_store(&phase, 2);
	for (int i = 0; i < B_COUNT; i++) {
		bs[i] = site_b();
		atomic_fetch_add(&held_b, B_BLOCK);
	}
	sleep_ms(plateau_ms);
	atomic_store(&phase, 3);
	for (int i = 0; i < C_COUNT; i++) {
		cs[i] = site_c();
		atomic_fetch_add(&held_c, C_BLOCK);
	}
	sleep_ms(plateau_ms);
	atomic_store(&phase, 4);
	for (int i = 0; i < A_COUNT; i++) {
		atomic_fetch_sub(&held_a, A_BLOCK);
		free(as[i]);
	}
	sleep_ms(plateau_ms);
	atomic_store(&phase, 5);
	malloc_trim(0);
	sleep_ms(plateau_ms);
	atomic_store(&phase, 6);
	printf("phases done\n");
	if (argc > 2 && strcmp(argv[2], "hold") == 0)
		while (fgets(line, sizeof line, stdin) && strncmp(line, "quit", 4) != 0)
			;
	atomic_store(&done, 1);
	pthread_join(th, NULL);
	fclose(truth);
	printf("bye\n");
	return 0;
}
