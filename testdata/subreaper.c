/* A child subreaper (prctl PR_SET_CHILD_SUBREAPER), as init-like
 * supervisors are: orphans of its descendants become its children. An
 * image made from it would, so arenactl must make none. One thread
 * allocates and frees, so that there is a heap to read.
 *
 * Commands on stdin, answered on stdout:
 *   check   "ok", or "bad <what>": a SIGCHLD arrived, or it has a child
 *   quit    exit 0 ("clean") or 3 ("damaged <what>")
 * It prints "ready" once its thread runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t sigchlds;
static volatile int started, stopping;

static void on_sigchld(int sig) {
	(void)sig;
	sigchlds++;
}

static void *alloc(void *arg) {
	(void)arg;
	void *keep[64] = {0};
	for (unsigned long i = 0; !stopping; i++) {
		unsigned k = i % 64;
		free(keep[k]);
		keep[k] = malloc(16 + (i * 37) % 4000);
		memset(keep[k], (int)k, 16);
		if (i % 4096 == 0) {
			started = 1;
			usleep(1000);
		}
	}
	for (int k = 0; k < 64; k++) free(keep[k]);
	return NULL;
}

/* check says what is wrong, or returns 1. */
static int check(char *why, size_t n) {
	if (sigchlds) {
		snprintf(why, n, "%d SIGCHLD", (int)sigchlds);
		return 0;
	}
	int st;
	pid_t c = waitpid(-1, &st, WNOHANG | __WALL);
	if (c > 0 || (c == 0)) {
		snprintf(why, n, "a child (%d)", (int)c);
		return 0;
	}
	if (errno != ECHILD) {
		snprintf(why, n, "waitpid: %s", strerror(errno));
		return 0;
	}
	return 1;
}

int main(void) {
	struct sigaction sa = {.sa_handler = on_sigchld, .sa_flags = SA_RESTART};
	sigaction(SIGCHLD, &sa, NULL);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) return 1;
	pthread_t th;
	pthread_create(&th, NULL, alloc, NULL);
	while (!started) usleep(1000);
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
	pthread_join(th, NULL);
	printf(ok ? "clean\n" : "damaged %s\n", why);
	return ok ? 0 : 3;
}
