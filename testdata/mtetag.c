/* An aarch64 target that tags its own memory (MTE), for the reachability
 * scan: with tag checks on (synchronous), it maps a page with PROT_MTE,
 * gives it a random tag (irg, stg on every granule) and keeps there, and in
 * a global, pointers to malloc'd chunks with tag bits 56-59 set. glibc's
 * own tagging is not used (Debian 12's faults under emulation,
 * docs/arm64.md). The main thread reads commands on stdin:
 *   truth   print "static ADDR -" for the chunks the global reaches,
 *           "region ADDR -" for the one only the tagged page reaches,
 *           "leaked-hidden X -" for one nothing reaches (its address
 *           is X with bits 48-63 flipped), then "end"
 *   check   read the tagged page through its tagged pointer (a tag that
 *           was changed faults) and print "ok" or "bad"
 *   quit    print "clean" (or "damaged") and exit 0 (3)
 * It prints "ready" once set up, "nomte" and exits 2 without MTE.
 * Built with -march=armv8.5-a+memtag. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#ifndef HWCAP2_MTE
#define HWCAP2_MTE (1 << 18)
#endif
#ifndef PROT_MTE
#define PROT_MTE 0x20
#endif
#ifndef PR_MTE_TCF_SYNC
#define PR_MTE_TCF_SYNC (1UL << 1)
#endif
#ifndef PR_MTE_TAG_SHIFT
#define PR_MTE_TAG_SHIFT 3
#endif

#define PAGE 4096
#define TAG(p, t) ((uint64_t)(uintptr_t)(p) | ((uint64_t)(t) << 56))

static volatile uint64_t global_refs[2]; /* tagged pointers to chunks */

/* The leaked chunk's address, kept in a form no scan reads as a pointer
 * (its top 16 bits flipped), and made in a function of its own so that
 * no register or spill of main's holds it. */
#define HIDE 0xffff000000000000ULL
static volatile uint64_t hidden;

__attribute__((noinline)) static void leak(void) {
	char *l = malloc(56);
	memset(l, 0x44, 56);
	hidden = (uint64_t)(uintptr_t)l ^ HIDE;
}

/* scrub overwrites the stack below main's frame, where leak's and
 * malloc's dead slots would otherwise still hold the address. */
__attribute__((noinline)) static void scrub(void) {
	volatile char buf[16384];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = 0;
}

int main(void) {
	if (!(getauxval(AT_HWCAP2) & HWCAP2_MTE)) {
		printf("nomte\n");
		return 2;
	}
	if (prctl(PR_SET_TAGGED_ADDR_CTRL, PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC | (0xfffeUL << PR_MTE_TAG_SHIFT), 0, 0, 0)) {
		perror("prctl");
		return 2;
	}
	char *page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE | PROT_MTE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED) {
		perror("mmap PROT_MTE");
		return 2;
	}
	uint64_t *tagged;
	/* A random tag from 1..15: the prctl's include mask (0xfffe) leaves 0 out. */
	__asm__ volatile("irg %0, %1" : "=r"(tagged) : "r"(page));
	for (int off = 0; off < PAGE; off += 16)
		__asm__ volatile("stg %0, [%0]" : : "r"((char *)tagged + off) : "memory");
	/* First, so that no pointer to the end of another chunk's data (a
	 * spilled memset end) falls in it. */
	leak();
	scrub();
	char *a = malloc(40), *b = malloc(200), *c = malloc(72);
	memset(a, 0x11, 40), memset(b, 0x22, 200), memset(c, 0x33, 72);
	global_refs[0] = TAG(a, 0x3);
	global_refs[1] = TAG(b, 0xc);
	tagged[0] = TAG(c, 0x5);
	for (int i = 1; i < PAGE / 8; i++)
		tagged[i] = 0x5a5a5a5a5a5a5a5aULL + i;
	printf("ready\n");
	fflush(stdout);
	char line[64];
	int bad = 0;
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "truth", 5)) {
			printf("static %#lx -\nstatic %#lx -\n", (unsigned long)(uintptr_t)a, (unsigned long)(uintptr_t)b);
			printf("region %#lx -\n", (unsigned long)(uintptr_t)c);
			/* Hidden still: printf's dead frames would keep it. */
			printf("leaked-hidden %#lx -\nend\n", (unsigned long)hidden);
		} else if (!strncmp(line, "check", 5)) {
			int ok = tagged[0] == TAG(c, 0x5);
			for (int i = 1; i < PAGE / 8; i++)
				ok &= tagged[i] == 0x5a5a5a5a5a5a5a5aULL + i;
			ok &= global_refs[0] == TAG(a, 0x3) && global_refs[1] == TAG(b, 0xc);
			for (int i = 0; i < 40; i++)
				ok &= ((volatile char *)(uintptr_t)global_refs[0])[i] == 0x11;
			if (!ok)
				bad = 1;
			printf(ok ? "ok\n" : "bad\n");
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
		fflush(stdout);
	}
	printf(bad ? "damaged\n" : "clean\n");
	return bad ? 3 : 0;
}
