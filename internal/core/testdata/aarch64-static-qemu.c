/* aarch64 fixture for internal/core: a static program that allocates in
 * its main arena, frees some, and stops on a trap in main. */
#include <stdlib.h>
#include <string.h>
int main(void) {
	char *keep = malloc(1000);
	memset(keep, 1, 1000);
	free(malloc(5000));
	__builtin_trap();
	return keep[0];
}
