// A target for arenactl leaks: threads that allocate from several sites,
// each behind its own call chain, built -O2 -fomit-frame-pointer. Five
// sites keep what they allocate (they leak), one allocates heavily and
// frees everything. Every site counts its own outstanding bytes.
//
// usage: leaks [THREADS]
// Commands on stdin, answered on stdout:
//   run     the threads allocate (they start paused): "running"
//   pause   the threads stop between two requests: "paused" once every
//           thread has
//   counts  "counts" then NAME=BYTES for every site (outstanding now)
//   quit    "bye", exit 0
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

// The chain to every site: serve > handle_connection > parse_request >
// site. The counters after each call keep the compiler from making them
// tail calls, which would leave no frame to unwind.
std::atomic<long> requests, connections;

__attribute__((noinline)) void parse_request(int i) {
	switch (i % 8) {
	case 0: leak_new(); break;
	case 1: leak_malloc(); break;
	case 2: leak_calloc(); break;
	case 3: grow_realloc(); break;
	case 4: leak_memalign(); break;
	default: churn(); break;
	}
	requests.fetch_add(1, std::memory_order_relaxed);
}

__attribute__((noinline)) void handle_connection(int i) {
	parse_request(i);
	connections.fetch_add(1, std::memory_order_relaxed);
}

std::atomic<bool> running;
std::atomic<int> idle; // threads waiting while paused

__attribute__((noinline)) void serve(int id) {
	for (long i = 0;; i++) {
		if (!running.load()) {
			idle++;
			while (!running.load()) usleep(1000);
			idle--;
		}
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
		if (!strncmp(line, "quit", 4)) {
			// _exit: exit's destructors of the sites' vectors would race
			// with the threads still pushing into them.
			printf("bye\n");
			fflush(stdout);
			_exit(0);
		}
		if (!strncmp(line, "run", 3)) {
			app::running = true;
			printf("running\n");
			continue;
		}
		if (!strncmp(line, "pause", 5)) {
			app::running = false;
			while (app::idle.load() < n) usleep(1000);
			printf("paused\n");
			continue;
		}
		std::string out = "counts";
		for (int s = 0; s < app::NSITES; s++) out += " " + std::string(app::names[s]) + "=" + std::to_string(app::outstanding[s].load());
		printf("%s\n", out.c_str());
	}
	return 0;
}
