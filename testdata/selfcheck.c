/* A target that checks itself, for the tests that kill arenactl (SIGKILL)
 * at random moments of an injection. Every thread holds known values in
 * callee-saved, vector and flag registers across what it does, and counts
 * any that changed; the parked threads issue their blocking syscalls raw,
 * so a syscall that returns EINTR (a restart the kernel would have done but
 * did not happen) or a wrong value is seen; one thread runs a register-only
 * loop in user code, so a borrowed running thread is checked too; one
 * allocates and frees, checking its blocks. No thread has a signal handler:
 * nothing may ever interrupt a syscall here.
 *
 * Commands on stdin, answered on stdout:
 *   check   wake every thread, wait until each made progress, then print
 *           "ok" or "bad <what>"
 *   quit    stop, check, exit 0 (3 if anything was wrong)
 * It prints "ready" once every thread runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { T_READ, T_NANOSLEEP, T_FUTEX_TIMED, T_FUTEX, T_PPOLL, T_SPIN, T_ALLOC, NT };
static const char *names[NT] = {"read", "nanosleep", "futex-timed", "futex", "ppoll", "spin", "alloc"};

static volatile long progress[NT];
static volatile long bad_regs[NT], bad_ret[NT], bad_mask, bad_heap;
static volatile int stopping;
static int pipes[2];
static volatile int futex_word;
static int have_avx2 __attribute__((unused));

#if defined(__x86_64__)
/* A raw syscall with rbx, r12..r15, xmm6/xmm7 (and ymm8's upper half with
 * AVX2) and the direction/carry flags loaded with values derived from k,
 * checked after it returns. Returns the syscall's value; *bad counts
 * registers that came back changed. */
static long checked_syscall(long nr, long a1, long a2, long a3, long a4, long a5, uint64_t k, volatile long *bad) {
	long ret;
	uint64_t diff;
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	uint64_t kk = k;
	if (have_avx2) {
		__asm__ volatile(
		    "mov %[k], %%rbx\n\t"
		    "lea 1(%%rbx), %%r12\n\t"
		    "lea 2(%%rbx), %%r13\n\t"
		    "lea 3(%%rbx), %%r14\n\t"
		    "lea 4(%%rbx), %%r15\n\t"
		    "movq %%rbx, %%xmm6\n\t"
		    "movq %%r12, %%xmm7\n\t"
		    "vmovq %%r13, %%xmm8\n\t"
		    "vpbroadcastq %%xmm8, %%ymm8\n\t"
		    "stc\n\t"
		    "syscall\n\t"
		    "setnc %%cl\n\t"
		    "movzbl %%cl, %%ecx\n\t"
		    "mov %%rbx, %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "lea -1(%%r12), %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "lea -2(%%r13), %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "lea -3(%%r14), %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "lea -4(%%r15), %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "movq %%xmm6, %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "movq %%xmm7, %%r11\n\t sub $1, %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "vextracti128 $1, %%ymm8, %%xmm9\n\t"
		    "vpextrq $1, %%xmm9, %%r11\n\t sub $2, %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "vzeroupper\n\t"
		    : "=a"(ret), "=&c"(diff), "+D"(a1), "+S"(a2), "+d"(a3), "+r"(r10), "+r"(r8)
		    : "a"(nr), [k] "m"(kk)
		    : "rbx", "r12", "r13", "r14", "r15", "r11", "r9", "xmm6", "xmm7", "xmm8", "xmm9", "memory", "cc");
	} else {
		__asm__ volatile(
		    "mov %[k], %%rbx\n\t"
		    "lea 1(%%rbx), %%r12\n\t"
		    "lea 2(%%rbx), %%r13\n\t"
		    "lea 3(%%rbx), %%r14\n\t"
		    "lea 4(%%rbx), %%r15\n\t"
		    "movq %%rbx, %%xmm6\n\t"
		    "movq %%r12, %%xmm7\n\t"
		    "stc\n\t"
		    "syscall\n\t"
		    "setnc %%cl\n\t"
		    "movzbl %%cl, %%ecx\n\t"
		    "mov %%rbx, %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "lea -1(%%r12), %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "lea -2(%%r13), %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "lea -3(%%r14), %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "lea -4(%%r15), %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "movq %%xmm6, %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    "movq %%xmm7, %%r11\n\t sub $1, %%r11\n\t xor %[k], %%r11\n\t or %%r11, %%rcx\n\t"
		    : "=a"(ret), "=&c"(diff), "+D"(a1), "+S"(a2), "+d"(a3), "+r"(r10), "+r"(r8)
		    : "a"(nr), [k] "m"(kk)
		    : "rbx", "r12", "r13", "r14", "r15", "r11", "r9", "xmm6", "xmm7", "memory", "cc");
	}
	/* The kernel's syscall path keeps flags: CF set before must still be set
	 * (r11 held them in the kernel; sysret/iret put them back). */
	if (diff) (*bad)++;
	return ret;
}
#elif defined(__aarch64__)
/* The same on aarch64: x19..x28, d8, d9, d15 and all of v16 (a syscall
 * keeps the V registers whole: Documentation/arch/arm64/sve.rst) and the
 * Z and C flags loaded from k, checked after the svc. */
static long checked_syscall(long nr, long a1, long a2, long a3, long a4, long a5, uint64_t k, volatile long *bad) {
	register long x0 __asm__("x0") = a1;
	register long x1 __asm__("x1") = a2;
	register long x2 __asm__("x2") = a3;
	register long x3 __asm__("x3") = a4;
	register long x4 __asm__("x4") = a5;
	register long x8 __asm__("x8") = nr;
	uint64_t diff, kk = k;
	__asm__ volatile(
	    "mov x19, %[k]\n\t"
	    "add x20, x19, #1\n\t add x21, x19, #2\n\t add x22, x19, #3\n\t"
	    "add x23, x19, #4\n\t add x24, x19, #5\n\t add x25, x19, #6\n\t"
	    "add x26, x19, #7\n\t add x27, x19, #8\n\t add x28, x19, #9\n\t"
	    "fmov d8, x19\n\t fmov d9, x20\n\t fmov d15, x21\n\t"
	    "fmov d16, x22\n\t mov v16.d[1], x23\n\t"
	    "cmp x19, x19\n\t" /* Z and C set */
	    "svc #0\n\t"
	    "cset %[d], ne\n\t"
	    "cset x9, cc\n\t orr %[d], %[d], x9\n\t"
	    "eor x9, x19, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x20, #1\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x21, #2\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x22, #3\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x23, #4\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x24, #5\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x25, #6\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x26, #7\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x27, #8\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "sub x9, x28, #9\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "fmov x9, d8\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "fmov x9, d9\n\t sub x9, x9, #1\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "fmov x9, d15\n\t sub x9, x9, #2\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "fmov x9, d16\n\t sub x9, x9, #3\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    "mov x9, v16.d[1]\n\t sub x9, x9, #4\n\t eor x9, x9, %[k]\n\t orr %[d], %[d], x9\n\t"
	    : "+r"(x0), [d] "=&r"(diff), "+r"(x1), "+r"(x2), "+r"(x3), "+r"(x4)
	    : "r"(x8), [k] "r"(kk)
	    : "x9", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
	      "v8", "v9", "v15", "v16", "memory", "cc");
	if (diff) (*bad)++;
	return x0;
}
#else
#error "selfcheck.c: no checked_syscall for this machine"
#endif

static uint64_t seed_of(int t, long i) { return 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1) ^ (uint64_t)i << 20; }

static void *parked(void *arg) {
	int t = (int)(intptr_t)arg;
	sigset_t own;
	if (t == T_PPOLL) {
		/* A mask of its own, and a different one inside ppoll: a tracer
		 * that restored the temporary one would leave SIGUSR2 blocked. */
		sigemptyset(&own);
		sigaddset(&own, SIGWINCH);
		pthread_sigmask(SIG_SETMASK, &own, NULL);
	}
	for (long i = 0; !stopping; i++) {
		long r;
		uint64_t k = seed_of(t, i);
		switch (t) {
		case T_READ: {
			char c;
			r = checked_syscall(SYS_read, pipes[0], (long)&c, 1, 0, 0, k, &bad_regs[t]);
			if (r != 1) bad_ret[t]++;
			break;
		}
		case T_NANOSLEEP: {
			struct timespec ts = {0, 20 * 1000 * 1000};
			r = checked_syscall(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, k, &bad_regs[t]);
			if (r != 0) bad_ret[t]++;
			break;
		}
		case T_FUTEX_TIMED: {
			int word = 0;
			struct timespec ts = {0, 30 * 1000 * 1000};
			r = checked_syscall(SYS_futex, (long)&word, FUTEX_WAIT_PRIVATE, 0, (long)&ts, 0, k, &bad_regs[t]);
			if (r != -ETIMEDOUT) bad_ret[t]++;
			break;
		}
		case T_FUTEX: {
			int seen = futex_word;
			r = checked_syscall(SYS_futex, (long)&futex_word, FUTEX_WAIT_PRIVATE, seen, 0, 0, k, &bad_regs[t]);
			if (r != 0 && r != -EAGAIN) bad_ret[t]++;
			break;
		}
		case T_PPOLL: {
			sigset_t inner;
			sigemptyset(&inner);
			sigaddset(&inner, SIGUSR2);
			struct timespec ts = {0, 40 * 1000 * 1000};
			struct pollfd none = {-1, 0, 0};
			r = checked_syscall(SYS_ppoll, (long)&none, 1, (long)&ts, (long)&inner, 8, k, &bad_regs[t]);
			if (r != 0) bad_ret[t]++;
			sigset_t now;
			pthread_sigmask(SIG_SETMASK, NULL, &now);
			if (!sigismember(&now, SIGWINCH) || sigismember(&now, SIGUSR2)) bad_mask++;
			break;
		}
		}
		progress[t]++;
	}
	return NULL;
}

/* Register-only work in user code: r12..r15 and xmm6 keep an invariant the
 * loop checks on every turn (with flags set by one instruction and read by
 * the next), so a thread borrowed here and given back wrong is caught. */
static void *spin(void *arg) {
	(void)arg;
	while (!stopping) {
		uint64_t errs;
#if defined(__aarch64__)
		/* x19, x20 and d8 keep the invariant; cmn sets Z, b.eq reads it */
		__asm__ volatile(
		    "mov %[e], #0\n\t"
		    "movz x19, #0xcdef\n\t movk x19, #0x89ab, lsl #16\n\t"
		    "movk x19, #0x4567, lsl #32\n\t movk x19, #0x0123, lsl #48\n\t"
		    "mvn x20, x19\n\t"
		    "movz w21, #0x4240\n\t movk w21, #0xf, lsl #16\n\t"
		    "fmov d8, x19\n\t"
		    "1:\n\t"
		    "fmov x22, d8\n\t eor x22, x22, x19\n\t orr %[e], %[e], x22\n\t"
		    "add x19, x19, #3\n\t"
		    "sub x20, x20, #3\n\t"
		    "eor x22, x19, x20\n\t"
		    "cmn x22, #1\n\t"
		    "b.eq 2f\n\t"
		    "add %[e], %[e], #1\n\t"
		    "2:\n\t"
		    "fmov d8, x19\n\t"
		    "subs w21, w21, #1\n\t"
		    "b.ne 1b\n\t"
		    : [e] "=&r"(errs)
		    :
		    : "x19", "x20", "x21", "x22", "v8", "cc");
#else
		__asm__ volatile(
		    "xor %%ecx, %%ecx\n\t"
		    "mov $0x0123456789abcdef, %%r12\n\t"
		    "mov %%r12, %%r13\n\t not %%r13\n\t"
		    "mov $1000000, %%r14d\n\t"
		    "movq %%r12, %%xmm6\n\t"
		    "1:\n\t"
		    "movq %%xmm6, %%r15\n\t xor %%r12, %%r15\n\t or %%r15, %%rcx\n\t"
		    "add $3, %%r12\n\t"
		    "sub $3, %%r13\n\t"
		    "mov %%r12, %%r15\n\t xor %%r13, %%r15\n\t"
		    "cmp $-1, %%r15\n\t"
		    "je 2f\n\t"
		    "inc %%rcx\n\t"
		    "2:\n\t"
		    "movq %%r12, %%xmm6\n\t"
		    "dec %%r14d\n\t"
		    "jnz 1b\n\t"
		    : "=&c"(errs)
		    :
		    : "r12", "r13", "r14", "r15", "xmm6", "cc");
#endif
		if (errs) bad_regs[T_SPIN]++;
		progress[T_SPIN]++;
	}
	return NULL;
}

static uint8_t pat(void *p, size_t i) { return (uint8_t)((uintptr_t)p >> 4 ^ i * 7); }

static void *alloc(void *arg) {
	(void)arg;
	unsigned seed = 7;
	void *slot[64] = {0};
	size_t sz[64] = {0};
	while (!stopping) {
		int i = rand_r(&seed) % 64;
		if (slot[i]) {
			for (size_t j = 0; j < sz[i]; j++)
				if (((uint8_t *)slot[i])[j] != pat(slot[i], j)) {
					bad_heap++;
					break;
				}
			free(slot[i]);
		}
		sz[i] = 16 + rand_r(&seed) % 3000;
		slot[i] = malloc(sz[i]);
		for (size_t j = 0; j < sz[i]; j++) ((uint8_t *)slot[i])[j] = pat(slot[i], j);
		progress[T_ALLOC]++;
		if (progress[T_ALLOC] % 64 == 0) {
			struct timespec ts = {0, 200 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	for (int i = 0; i < 64; i++) free(slot[i]);
	return NULL;
}

/* Wakes every thread and waits for each to make progress. */
static int check(char *why, size_t n) {
	long before[NT];
	for (int t = 0; t < NT; t++) before[t] = progress[t];
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if (write(pipes[1], "x", 1) != 1) {
			snprintf(why, n, "write: %s", strerror(errno));
			return 0;
		}
		__atomic_add_fetch(&futex_word, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
		int all = 1;
		for (int t = 0; t < NT; t++)
			if (progress[t] <= before[t] + 1) all = 0;
		if (all) break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 20) {
			for (int t = 0; t < NT; t++)
				if (progress[t] <= before[t] + 1) {
					snprintf(why, n, "thread %s made no progress", names[t]);
					return 0;
				}
		}
		usleep(2000);
	}
	/* Drain the wake-ups the reader did not consume. */
	for (int t = 0; t < NT; t++) {
		if (bad_regs[t]) {
			snprintf(why, n, "thread %s saw %ld changed registers", names[t], bad_regs[t]);
			return 0;
		}
		if (bad_ret[t]) {
			snprintf(why, n, "thread %s saw %ld wrong syscall results", names[t], bad_ret[t]);
			return 0;
		}
	}
	if (bad_mask) {
		snprintf(why, n, "the ppoll thread's signal mask changed %ld times", bad_mask);
		return 0;
	}
	if (bad_heap) {
		snprintf(why, n, "%ld damaged heap blocks", bad_heap);
		return 0;
	}
	return 1;
}

int main(void) {
#if defined(__x86_64__)
	have_avx2 = __builtin_cpu_supports("avx2");
#endif
	if (pipe(pipes)) return 1;
	pthread_t th[NT];
	for (int t = 0; t < NT; t++) {
		void *(*fn)(void *) = t == T_SPIN ? spin : t == T_ALLOC ? alloc : parked;
		pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t);
	}
	for (int t = 0; t < NT; t++)
		while (progress[t] == 0 && t != T_READ && t != T_FUTEX) usleep(1000);
	printf("ready\n");
	fflush(stdout);
	char line[64], why[200];
	int ok = 1;
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "check", 5)) {
			if (check(why, sizeof why))
				printf("ok\n");
			else
				printf("bad %s\n", why), ok = 0;
			fflush(stdout);
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
	}
	ok = check(why, sizeof why) && ok;
	stopping = 1;
	for (int i = 0; i < 4; i++) (void)!write(pipes[1], "x", 1);
	__atomic_add_fetch(&futex_word, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
	for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
	printf(ok ? "clean\n" : "damaged %s\n", why);
	return ok ? 0 : 3;
}
