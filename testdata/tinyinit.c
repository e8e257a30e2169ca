/* pid 1 of a test container, as tini or `docker run --init` is: it runs
 * PROG as its only child, reaps every process that ends under it (an orphan
 * of the container is reparented to it), passes SIGTERM and SIGINT on to
 * the child and exits with the child's status. Built static, so that a root
 * filesystem needs no libc for it.
 *
 *   tinyinit [-P] [-u DIR] [-U ID] [-e] PROG [ARG...]
 *     -P      first mount a proc file system (of its pid namespace) on /proc
 *     -u DIR  then detach the mount at DIR (the old root, after pivot_root)
 *     -U ID   run PROG (and with -e, itself) as uid and gid ID
 *     -e      no init: become PROG (which is then pid 1) */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child;

static void pass(int sig) { kill(child, sig); }

static void become(int id) {
	if (id >= 0 && (setgroups(0, NULL) || setgid(id) || setuid(id)))
		_exit(126);
}

int main(int argc, char **argv) {
	int id = -1, in_place = 0, i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-P")) {
			if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
				return 124;
		} else if (!strcmp(argv[i], "-u") && i + 1 < argc) {
			if (umount2(argv[++i], MNT_DETACH))
				return 125;
		} else if (!strcmp(argv[i], "-U") && i + 1 < argc) {
			id = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "-e")) {
			in_place = 1;
		} else {
			return 2;
		}
	}
	if (i >= argc)
		return 2;
	if (in_place) {
		become(id);
		execv(argv[i], argv + i);
		return 127;
	}
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		become(id);
		execv(argv[i], argv + i);
		_exit(127);
	}
	signal(SIGTERM, pass);
	signal(SIGINT, pass);
	for (;;) {
		int st;
		pid_t p = wait(&st);
		if (p == child)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (p < 0 && errno != EINTR)
			return 1;
	}
}
