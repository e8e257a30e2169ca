// The unwinder's and symbolizer's target (internal/unwind, internal/symbolize
// tests): threads parked at the end of known call chains, built
// -O2 -fomit-frame-pointer so only CFI can unwind them.
//
//   chain thread:  chain_main -> a::run -> b<int>::step -> lib::c (libchain_dbg.so, -g)
//                  -> nd::d (libchain_nodbg.so, no -g) -> leaf_wait
//                  (-> wait_inner, inlined) -> read()
//   signal thread: sig_main -> sig_wait -> read(); on SIGUSR1:
//                  on_signal -> handler_park -> read()
//
// Protocol: prints "ready chain=TID sig=TID"; "signal" makes the signal
// thread take SIGUSR1 and answers "handling" once the handler is parked;
// "crash" aborts (for a core); "quit" answers "bye" and exits.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace lib {
int c(int n, int (*cb)(int));
}

static int park_fd[2], sig_fd[2], handler_fd[2];
static volatile int chain_tid, sig_tid, handler_parked;
static pthread_t sig_thread;

// Each step does some work after its call, so that no call is a tail call
// and every frame stays on the stack.
// Inlined into leaf_wait: the symbolizer reports both, innermost first.
static inline __attribute__((always_inline)) int wait_inner(int fd) {
	char c;
	int r = read(fd, &c, 1);
	return r;
}

extern "C" __attribute__((noinline)) int leaf_wait(int n) {
	int r = wait_inner(park_fd[0]);
	return r + n;
}

namespace a {
struct runner {
	__attribute__((noinline)) int run(int n);
};
}  // namespace a

template <typename T> struct b {
	T acc;
	__attribute__((noinline)) T step(T n) {
		acc += lib::c(n, leaf_wait);
		return acc * 3;
	}
};

__attribute__((noinline)) int a::runner::run(int n) {
	b<int> s{n};
	int r = s.step(n + 1);
	return r + 7;
}

static void *chain_main(void *) {
	chain_tid = syscall(SYS_gettid);
	a::runner r;
	int v = r.run(3);
	return (void *)(long)v;
}

extern "C" __attribute__((noinline)) int handler_park(int sig) {
	char c;
	handler_parked = 1;
	int r = read(handler_fd[0], &c, 1);
	return r + sig;
}

static void on_signal(int sig) {
	volatile int keep = handler_park(sig);
	(void)keep;
}

extern "C" __attribute__((noinline)) int sig_wait(int n) {
	char c;
	int r;
	do
		r = read(sig_fd[0], &c, 1);
	while (r < 0);
	return r + n;
}

static void *sig_main(void *) {
	sig_tid = syscall(SYS_gettid);
	int v = sig_wait(5);
	return (void *)(long)v;
}

int main() {
	if (pipe(park_fd) || pipe(sig_fd) || pipe(handler_fd))
		return 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t t;
	pthread_create(&t, NULL, chain_main, NULL);
	pthread_create(&sig_thread, NULL, sig_main, NULL);
	while (!chain_tid || !sig_tid)
		usleep(1000);
	usleep(20000);  // let both threads reach their read()
	printf("ready chain=%d sig=%d\n", chain_tid, sig_tid);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "signal", 6)) {
			pthread_kill(sig_thread, SIGUSR1);
			while (!handler_parked)
				usleep(1000);
			usleep(20000);
			printf("handling\n");
		} else if (!strncmp(line, "crash", 5)) {
			abort();  // a core with both threads parked
		} else if (!strncmp(line, "quit", 4)) {
			printf("bye\n");
			fflush(stdout);
			break;
		} else {
			printf("unknown\n");
		}
		fflush(stdout);
	}
	_exit(0);
}
