// The heap profile's target (internal/stackprof tests): threads parked at
// the allocation points of known call chains, built -O2
// -fomit-frame-pointer so only CFI unwinds them. Each parks in park()
// right before its allocation; the test takes the thread's registers and
// stack there and makes of them what the sampler sees at the allocator's
// entry (the return address into the allocating function pushed, pc at
// operator new or realloc).
//
//   widget thread: widget_main -> server::handle -> cache<int>::fill
//                  -> make_widget -> operator new (a polymorphic Widget)
//   buffer thread: buffer_main -> parser::parse -> grow_buffer
//                  (-> reserve, inlined) -> realloc
//
// Protocol: prints "ready widget=TID buffer=TID"; "quit" answers "bye" and
// exits.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int park_fd[2];
static volatile int widget_tid, buffer_tid;
struct Base;
static Base *volatile kept_widget;
static volatile long kept_parse;

// park blocks until the pipe is written (never, until exit).
extern "C" __attribute__((noinline)) int park(int n) {
	char c;
	int r = read(park_fd[0], &c, 1);
	return r + n;
}

struct Base {
	virtual ~Base() {}
	virtual int size() const = 0;
};

struct Widget : Base {
	int n;
	char payload[88];
	explicit Widget(int n) : n(n) { memset(payload, n, sizeof payload); }
	int size() const override { return n; }
};

// Every step does work after its call, so no call is a tail call and every
// frame stays on the stack.
extern "C" __attribute__((noinline)) Base *make_widget(int n) {
	Base *w = (park(n), new Widget(n));  // site:widget
	return w;
}

template <typename T> struct cache {
	T filled;
	__attribute__((noinline)) Base *fill(T n) {
		Base *w = make_widget(n + 1);
		filled += w->size();
		return w;
	}
};

namespace server {
__attribute__((noinline)) Base *handle(int n) {
	cache<int> c{n};
	Base *w = c.fill(n * 2);
	return c.filled > 0 ? w : nullptr;
}
}  // namespace server

static void *widget_main(void *) {
	widget_tid = syscall(SYS_gettid);
	kept_widget = server::handle(3);  // a store after the call: no tail call
	return NULL;
}

char *buf;  // not static: realloc's old pointer stays unknown to the compiler

// Inlined into grow_buffer: the profile shows both, as pprof does.
static inline __attribute__((always_inline)) char *reserve(size_t n) {
	return (char *)(park((int)n), realloc(buf, n));  // site:buffer
}

extern "C" __attribute__((noinline)) char *grow_buffer(size_t n) {
	char *p = reserve(n);  // site:reserve
	if (p)
		p[0] = 1;
	return p;
}

namespace parser {
__attribute__((noinline)) long parse(size_t n) {
	char *p = grow_buffer(n * 4096);
	return p ? (long)p[0] + 1 : 0;
}
}  // namespace parser

static void *buffer_main(void *) {
	buffer_tid = syscall(SYS_gettid);
	buf = (char *)malloc(64);
	kept_parse = parser::parse(16);
	return NULL;
}

int main() {
	if (pipe(park_fd))
		return 1;
	pthread_t t1, t2;
	pthread_create(&t1, NULL, widget_main, NULL);
	pthread_create(&t2, NULL, buffer_main, NULL);
	while (!widget_tid || !buffer_tid)
		usleep(1000);
	usleep(20000);  // let both threads reach their read()
	printf("ready widget=%d buffer=%d\n", widget_tid, buffer_tid);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "quit", 4)) {
			printf("bye\n");
			fflush(stdout);
			break;
		}
		printf("unknown\n");
		fflush(stdout);
	}
	_exit(0);
}
