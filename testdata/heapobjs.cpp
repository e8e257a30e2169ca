// A target whose heap holds objects it can describe itself, for arenactl
// heap's tests: each object is reachable one known way, or leaked, and the
// target says which on "truth". Built with g++ -O2.
//
// Commands on stdin, one a line, answered on stdout:
//   truth   one line per object, "CLASS ADDR TYPE", ADDR the pointer malloc
//           or new returned (hex), CLASS static, stack, leaked or inner
//           (leaked, referenced only by other leaked objects), TYPE the
//           C++ class or "-"; then "pin ADDR FREE" (the live object highest
//           in the pinning thread's arena, and the bytes it freed below it);
//           then "end"
//   quit    answers "bye" and exits
// It prints "ready" once every object is in place and every thread parked.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <pthread.h>
#include <unordered_map>
#include <vector>

struct Base {
	virtual ~Base() {}
	virtual const char *name() const = 0;
	long tag = 0x5441475441475441;
};
struct Session : Base {
	const char *name() const override { return "Session"; }
	char user[64] = "session-user";
};
struct Buffer : Base {
	const char *name() const override { return "Buffer"; }
	char data[200] = {};
};
struct Leaky : Base {
	const char *name() const override { return "Leaky"; }
	char junk[40] = "leaked on purpose";
};
struct PinObj : Base {
	const char *name() const override { return "PinObj"; }
};
struct Node {
	Node *next;
	long payload[5];
};

// The truth is kept in static data with every address masked: stored as
// is, it would be a reference to the object, which the scan would follow.
static const uintptr_t mask = 0x5a5a5a5a5a5a5a5aull;
struct Truth {
	const char *cls;
	uintptr_t masked;
	const char *type;
};
static Truth truth[64];
static std::atomic<int> ntruth;
static void note(const char *cls, void *p, const char *type) { truth[ntruth++] = {cls, (uintptr_t)p ^ mask, type}; }

// Reached from static data.
std::vector<Base *> g_vec;
std::unordered_map<int, Session *> g_map;
char *g_interior;      // points 100 bytes into its block
void **g_mmapped;      // a page of our own, not malloc's, holding one pointer
Base *volatile g_drop; // a last pointer, overwritten

static uintptr_t pin_obj; // masked, as the truth is: the pin is the arena's highest live object, static-reached through g_pins
Base *volatile g_pin_slot;
static size_t pin_freed;
static std::atomic<int> parked;
static int park_pipe[2];

static void park() {
	parked++;
	char c;
	while (read(park_pipe[0], &c, 1) < 0) {
	}
}

// A list reached only from this thread's stack: its head is a local.
static void *stack_thread(void *) {
	Node *volatile head = nullptr;
	for (int i = 0; i < 3; i++) {
		Node *n = static_cast<Node *>(malloc(sizeof(Node)));
		n->next = head;
		head = n;
		note("stack", n, "-");
	}
	park();
	return head;
}

// An object reached only from a register: the thread spins with it in
// r15 (x28 on arm64: callee-saved, so nothing else of the loop uses it),
// never storing it.
static std::atomic<int> spin_ready;
static void *register_thread(void *) {
#if defined(__aarch64__)
	register Session *keep asm("x28") = new Session;
#define SPIN "yield"
#else
	register Session *keep asm("r15") = new Session;
#define SPIN "pause"
#endif
	asm volatile("" : "+r"(keep));
	note("stack", keep, "Session");
	spin_ready = 1;
	for (;;) asm volatile(SPIN : : "r"(keep));
	return nullptr;
}

// An object reached from a thread-local.
thread_local Buffer *tl_buf; // not static: a store-only static one is dropped by -O2
static void *tls_thread(void *) {
	tl_buf = new Buffer;
	note("static", tl_buf, "Buffer");
	park();
	return nullptr;
}

// A live object high in an arena of its own, with the memory freed below it.
static void *pin_thread(void *) {
	enum { N = 256, SZ = 4000 };
	void *blocks[N];
	for (int i = 0; i < N; i++) blocks[i] = malloc(SZ);
	PinObj *p = new PinObj;
	for (int i = 0; i < N; i++) free(blocks[i]);
	pin_obj = (uintptr_t)p ^ mask;
	pin_freed = (size_t)N * (SZ + 16);
	note("static", p, "PinObj");
	g_pin_slot = p;
	park();
	return nullptr;
}

__attribute__((noinline)) static void make_leaks() {
	Leaky *l = new Leaky;
	note("leaked", l, "Leaky");
	g_drop = l;
	g_drop = nullptr;
	// A lost list: its head is referenced by nothing, the rest by it.
	Node *head = nullptr;
	for (int i = 0; i < 3; i++) {
		Node *n = static_cast<Node *>(malloc(sizeof(Node)));
		n->next = head;
		head = n;
	}
	note("leaked", head, "-");
	note("inner", head->next, "-");
	note("inner", head->next->next, "-");
	// A lost cycle: each referenced only by the other.
	Node *a = static_cast<Node *>(malloc(sizeof(Node)));
	Node *b = static_cast<Node *>(malloc(sizeof(Node)));
	a->next = b;
	b->next = a;
	note("inner", a, "-");
	note("inner", b, "-");
	// Free chunks in a tcache and in a fastbin are never objects.
	void *small[16];
	for (int i = 0; i < 16; i++) small[i] = malloc(24);
	for (int i = 0; i < 16; i++) free(small[i]);
}

// Scrubs the stack below the caller: no stale copy of a pointer the
// leaking function held may stay above the stack pointer later.
__attribute__((noinline)) static void scrub() {
	volatile char buf[16384];
	memset((char *)buf, 0, sizeof buf);
}

int main() {
	setvbuf(stdout, nullptr, _IOLBF, 0);
	if (pipe(park_pipe)) return 2;

	for (int i = 0; i < 4; i++) {
		Base *o = i % 2 ? static_cast<Base *>(new Session) : new Buffer;
		g_vec.push_back(o);
		note("static", o, o->name());
	}
	for (int i = 0; i < 3; i++) {
		Session *s = new Session;
		g_map[i] = s;
		note("static", s, "Session");
	}
	char *blk = static_cast<char *>(malloc(256));
	g_interior = blk + 100;
	note("static", blk, "-");
	g_mmapped = static_cast<void **>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	Buffer *viamm = new Buffer;
	g_mmapped[7] = viamm;
	note("static", viamm, "Buffer");

	make_leaks();
	scrub();

	pthread_t th;
	pthread_create(&th, nullptr, stack_thread, nullptr);
	pthread_create(&th, nullptr, tls_thread, nullptr);
	pthread_create(&th, nullptr, pin_thread, nullptr);
	pthread_create(&th, nullptr, register_thread, nullptr);
	while (parked < 3 || !spin_ready) usleep(1000);
	printf("ready\n");

	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "truth", 5)) {
			for (int i = 0; i < ntruth; i++) printf("%s %#lx %s\n", truth[i].cls, (unsigned long)(truth[i].masked ^ mask), truth[i].type);
			printf("pin %#lx %zu\n", (unsigned long)(pin_obj ^ mask), pin_freed);
			printf("end\n");
		} else if (!strncmp(line, "quit", 4)) {
			printf("bye\n");
			fflush(stdout);
			_exit(0);
		}
	}
	return 0;
}
