// A target for arenactl leaks: threads that allocate from several sites,
// each behind its own call chain, built -O2 -fomit-frame-pointer. Five
// sites keep what they allocate (they leak), one allocates heavily and
// frees everything. Every site counts its own outstanding bytes.
//
// usage: leaks [THREADS]
// Commands on stdin, answered on stdout:
//   counts  "counts" then NAME=BYTES for every site (outstanding now)
//   quit    exit 0
// It prints "ready" once every thread runs.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace app {

enum Site { NEW, MALLOC, CALLOC, REALLOC, MEMALIGN, CHURN, NSITES };
const char *names[NSITES] = {"leak_new", "leak_malloc", "leak_calloc", "grow_realloc", "leak_memalign", "churn"};
std::atomic<long> outstanding[NSITES];

struct Shape {
	virtual ~Shape() {}
	virtual long area() const = 0;
};
struct Polygon : Shape {
	long sides[60];
	explicit Polygon(long n) {
		for (auto &s : sides) s = n;
	}
	long area() const override { return sides[0] * sides[1]; }
};

std::mutex keep_mu;
std::vector<void *> kept;

static void keep(void *p) {
	std::lock_guard<std::mutex> g(keep_mu);
	kept.push_back(p);
}

__attribute__((noinline)) void leak_new() {
	Shape *s = new Polygon(3);
	keep(s);
	outstanding[NEW] += sizeof(Polygon);
}

__attribute__((noinline)) void leak_malloc() {
	void *p = malloc(4000);
	memset(p, 1, 64);
	keep(p);
	outstanding[MALLOC] += 4000;
}

__attribute__((noinline)) void leak_calloc() {
	void *p = calloc(50, 40);
	keep(p);
	outstanding[CALLOC] += 50 * 40;
}

thread_local char *grown;
thread_local size_t grown_size;

__attribute__((noinline)) void grow_realloc() {
	size_t n = grown_size ? grown_size + grown_size / 8 : 1024;
	if (n > (256 << 10)) { // start a new buffer; the old one stays
		keep(grown);
		grown = nullptr;
		grown_size = 0;
		n = 1024;
	}
	char *p = static_cast<char *>(realloc(grown, n));
	p[n - 1] = 1;
	outstanding[REALLOC] += long(n) - long(grown_size);
	grown = p;
	grown_size = n;
}

__attribute__((noinline)) void leak_memalign() {
	void *p;
	if (posix_memalign(&p, 64, 2048) == 0) {
		keep(p);
		outstanding[MEMALIGN] += 2048;
	}
}

__attribute__((noinline)) void churn() {
	void *ps[64];
	for (int i = 0; i < 64; i++) {
		ps[i] = malloc(512 + i * 16);
		outstanding[CHURN] += 512 + i * 16;
	}
	for (int i = 0; i < 64; i++) {
		free(ps[i]);
		outstanding[CHURN] -= 512 + i * 16;
	}
}

// The chains: every site is reached through two functions of its own.
__attribute__((noinline)) void parse_request(int i) {
	switch (i % 8) {
	case 0: leak_new(); break;
	case 1: leak_malloc(); break;
	case 2: leak_calloc(); break;
	case 3: grow_realloc(); break;
	case 4: leak_memalign(); break;
	default: churn(); break;
	}
}

__attribute__((noinline)) void handle_connection(int i) { parse_request(i); }

__attribute__((noinline)) void serve(int id) {
	for (long i = 0;; i++) {
		handle_connection(int(i + id));
		if (i % 4 == 0) usleep(1000);
	}
}

} // namespace app

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 2;
	for (int i = 0; i < n; i++) std::thread(app::serve, i).detach();
	setvbuf(stdout, nullptr, _IOLBF, 0);
	printf("ready\n");
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "quit", 4)) return 0;
		std::string out = "counts";
		for (int s = 0; s < app::NSITES; s++) out += " " + std::string(app::names[s]) + "=" + std::to_string(app::outstanding[s].load());
		printf("%s\n", out.c_str());
	}
	return 0;
}
