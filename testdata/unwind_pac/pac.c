/* An aarch64 program built with -mbranch-protection=standard (pac-ret and
 * BTI): every function below signs x30 (paciasp) before saving it, and its
 * CFI says so (DW_CFA_AARCH64_negate_ra_state). Run under qemu-user with
 * -cpu max (pointer authentication on), leaf3 writes to the file argv[1]:
 * its pc, sp, x29 and x30 at one instruction, then its stack from sp up
 * to argv (above every frame), then /proc/self/maps; internal/unwind's
 * TestAArch64SignedFrames unwinds that. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static char **args;
static unsigned char copy[256 << 10];

__attribute__((noinline)) void leaf3(int n) {
	uint64_t pc, sp, fp, lr;
	__asm__ volatile("adr %0, .\n\tmov %1, sp\n\tmov %2, x29\n\tmov %3, x30" : "=r"(pc), "=r"(sp), "=r"(fp), "=r"(lr));
	uint64_t len = (uint64_t)(uintptr_t)args - sp;
	if (len > sizeof copy) len = sizeof copy;
	memcpy(copy, (void *)(uintptr_t)sp, len);
	FILE *f = fopen(args[1], "w");
	if (!f) return;
	uint64_t head[5] = {pc, sp, fp, lr, len};
	fwrite(head, sizeof head, 1, f);
	fwrite(copy, 1, len, f);
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	while (m && fgets(line, sizeof line, m)) fputs(line, f);
	fclose(f);
	printf("%d\n", n);
}
__attribute__((noinline)) void mid2(int n) { leaf3(n + 1); printf("mid2\n"); }
__attribute__((noinline)) void top1(int n) { mid2(n + 1); printf("top1\n"); }
int main(int argc, char **argv) {
	args = argv;
	if (argc < 2) return 2;
	top1(argc);
	return 0;
}
