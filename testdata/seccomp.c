/* A process under a seccomp filter (one that allows everything: the kernel
 * shows "Seccomp: 2" all the same, and arenactl cannot know what a filter
 * allows). It allocates a little, prints "ready" and waits for "quit". */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
	struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
	struct sock_fprog prog = {1, allow};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) return 2;
	char *keep = malloc(1000);
	memset(keep, 1, 1000);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin))
		if (!strncmp(line, "quit", 4)) {
			printf("clean\n");
			return 0;
		}
	return 0;
}
