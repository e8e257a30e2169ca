/* Runs a call site's code page the way an injected call does, without
 * ptrace: maps a site, copies the image (argv[1]) to its code page, and
 * calls the raw syscall routine and the lock routine as functions, with
 * the page's offsets from argv[2..5] (raw, lock, lock_wait, restore).
 * Built for the image's machine (aarch64 under qemu-user on x86_64) by
 * TestRoutinesRun; prints "ok" or what went wrong. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "../site.h"
#undef CODE_OFF
#define CODE_OFF ARM64_CODE_OFF

/* Calls a routine as an injected call runs it: it may use any register
 * (the thread's own come back from the site), so the compiler is told
 * that the callee-saved ones it uses, x19 and x20, change too. */
static long call(void *fn, long a0, long a1, long a2, long a3, long a4, long a5) {
	register long x0 __asm__("x0") = a0;
	register long x1 __asm__("x1") = a1;
	register long x2 __asm__("x2") = a2;
	register long x3 __asm__("x3") = a3;
	register long x4 __asm__("x4") = a4;
	register long x5 __asm__("x5") = a5;
	__asm__ volatile("blr %[fn]"
			 : "+r"(x0), "+r"(x1), "+r"(x2), "+r"(x3), "+r"(x4), "+r"(x5)
			 : [fn] "r"(fn)
			 : "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16", "x17",
			   "x19", "x20", "x30", "memory", "cc");
	return x0;
}

static int saw_waiter;

/* Holds the lock (1) until the routine marks it contended (2), then lets
 * it go as glibc's lll_unlock does. */
static void *releaser(void *p) {
	uint32_t *w = p;
	for (int i = 0; i < 2000 && __atomic_load_n(w, __ATOMIC_ACQUIRE) != 2; i++) usleep(1000);
	saw_waiter = __atomic_load_n(w, __ATOMIC_ACQUIRE) == 2;
	if (__atomic_exchange_n(w, 0, __ATOMIC_RELEASE) == 2) syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
	return 0;
}

static int fail(const char *what) {
	printf("%s\n", what);
	return 1;
}

int main(int argc, char **argv) {
	if (argc != 6) return fail("usage: run image raw lock lock_wait restore");
	FILE *f = fopen(argv[1], "rb");
	if (!f) return fail("no image");
	unsigned char *site = mmap(0, 3 * ARM64_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t n = fread(site + CODE_OFF, 1, ARM64_PAGE, f);
	fclose(f);
	if (n == 0 || n == ARM64_PAGE) return fail("image empty or larger than a page");
	if (mprotect(site + CODE_OFF, ARM64_PAGE, PROT_READ | PROT_EXEC)) return fail("mprotect");
	__builtin___clear_cache((char *)site + CODE_OFF, (char *)site + CODE_OFF + n);
	uint64_t raw = strtoull(argv[2], 0, 0), lock = strtoull(argv[3], 0, 0);
	void *rawf = site + CODE_OFF + raw, *lockf = site + CODE_OFF + lock;
	if (call(rawf, SYS_getpid, 0, 0, 0, 0, 0) != getpid()) return fail("raw(getpid) is not getpid()");
	if (call(rawf, SYS_close, -1, 0, 0, 0, 0) != -9) return fail("raw(close(-1)) is not -EBADF");

	/* The lock routine: a free lock is taken, held for its polls while
	 * every signal is blocked, and let go; the thread's mask comes back. */
	*(uint64_t *)(site + HDR_SIG_ALL) = ~0ull;
	sigset_t before, after;
	sigemptyset(&before);
	sigaddset(&before, SIGUSR1);
	sigprocmask(SIG_SETMASK, &before, 0);
	static uint32_t word;
	if (call(lockf, (long)&word, 3, 0, 0, 0, 0) != 0) return fail("lock did not return 0");
	if (word != 0) return fail("the lock was not let go");
	if (*(uint64_t *)(site + HDR_LOCK_STATE) != LOCK_STATE_LETTING_GO) return fail("state is not letting go");
	if (*(uint64_t *)(site + HDR_SIG_OLD) != (1ull << (SIGUSR1 - 1))) return fail("the old mask was not saved");
	sigprocmask(SIG_SETMASK, 0, &after);
	if (!sigismember(&after, SIGUSR1) || sigismember(&after, SIGUSR2)) return fail("the mask did not come back");
	/* Released at once: no poll. */
	*(uint64_t *)(site + HDR_LOCK_RELEASE) = 1;
	if (call(lockf, (long)&word, 1000000, 0, 0, 0, 0) != 0 || word != 0) return fail("a released hold did not end");
	/* A lock another thread holds: the routine marks it contended (2),
	 * waits in the futex until that thread lets it go and wakes it, takes
	 * it, and lets it go with a wake of its own. */
	*(uint64_t *)(site + HDR_LOCK_RELEASE) = 0;
	word = 1;
	pthread_t th;
	pthread_create(&th, 0, releaser, &word);
	if (call(lockf, (long)&word, 0, 0, 0, 0, 0) != 0 || word != 0) return fail("a contended lock was not taken and let go");
	pthread_join(th, 0);
	if (!saw_waiter) return fail("the routine did not mark the lock contended");
	printf("ok\n");
	return 0;
}
