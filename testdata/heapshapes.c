/* Heap shapes that cost a scan the most, for `arenactl heap`'s bounds:
 * - a list of NODES 16-byte nodes linked in shuffled order (each next
 *   node anywhere in the heap), reachable only through a global head;
 * - a table of pointers to TABLE other nodes, in shuffled order,
 *   allocated after them (a hash table's buckets: every reference behind
 *   it);
 * - a lost cycle of CYCLE nodes, also linked in shuffled order, that
 *   nothing outside it points to.
 * The three kinds of node are interleaved in memory. It prints
 * "ready NODES TABLE CYCLE" and waits for "quit" (answered "bye"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES 1000000
#define TABLE 200000
#define CYCLE 100000

struct node {
	struct node *next;
	long id;
};

struct node *head;
struct node **table;

static unsigned long long seed = 88172645463325252ULL;
static unsigned long next_random(void) {
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}

static void shuffle(struct node **a, long n) {
	for (long i = n - 1; i > 0; i--) {
		long j = next_random() % (i + 1);
		struct node *t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

/* link links a's n nodes in shuffled order; the last points to the first
 * when cycle. */
static struct node *link(struct node **a, long n, int cycle) {
	shuffle(a, n);
	for (long i = 0; i + 1 < n; i++)
		a[i]->next = a[i + 1];
	a[n - 1]->next = cycle ? a[0] : NULL;
	return a[0];
}

static struct node *node(long id) {
	struct node *n = malloc(sizeof *n);
	n->next = NULL;
	n->id = id;
	return n;
}

int main(void) {
	struct node **list = malloc(NODES * sizeof *list), **lost = malloc(CYCLE * sizeof *lost);
	table = malloc(TABLE * sizeof *table);
	long t = 0, c = 0;
	for (long i = 0; i < NODES; i++) {
		list[i] = node(i);
		if (i % (NODES / TABLE) == 0 && t < TABLE)
			table[t++] = node(-1);
		if (i % (NODES / CYCLE) == 0 && c < CYCLE)
			lost[c++] = node(-2);
	}
	shuffle(table, TABLE);
	head = link(list, NODES, 0);
	link(lost, CYCLE, 1);
	/* The working arrays would reach every node: clear and free them. */
	memset(list, 0, NODES * sizeof *list);
	memset(lost, 0, CYCLE * sizeof *lost);
	free(list);
	free(lost);
	printf("ready %d %d %d\n", NODES, TABLE, CYCLE);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin))
		if (strncmp(line, "quit", 4) == 0)
			break;
	printf("bye\n");
	return 0;
}
