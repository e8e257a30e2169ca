package glibc

// SetMemory bounds what a walk keeps in memory by the budget arenactl
// gives it (internal/budget): the copies of an arena's heaps (two buffers
// of windowCap, the walker's and the loader's running ahead), the cache of
// blocks read outside them (cacheCap) and the links the prewalk records
// (24 bytes each) each take at most an eighth of it, the copies and the
// cache at least 8 MiB and the copies at most what they took before any
// budget (96 MiB, which holds a thread arena's whole 64 MiB heap); the
// rest is left to the chunk index and the scan. Call it before a walk,
// never during one.
func SetMemory(budget uint64) {
	share := budget / 8
	windowCap = min(max(share, 8<<20), 96<<20) &^ (2<<20 - 1) // whole huge pages
	cacheCap = max(share, 8<<20)
	links := int(max(share/24, 1<<16))
	prewalkBudget = min(1<<19, links)
	prewalkBudgetParts = links
}
