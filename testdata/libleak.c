/* A library testdata/churn.c dlopens while it is profiled: lib_leak()
 * allocates and keeps a block every call. */
#include <stdlib.h>
#include <string.h>

void *lib_kept[1 << 16]; /* exported: the stores are not dead */
static int n;

__attribute__((noinline)) void lib_leak(void) {
	void *p = malloc(8000);
	memset(p, 2, 16);
	lib_kept[n++ & ((1 << 16) - 1)] = p;
}
