package glibc

import (
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"github.com/arenactl/arenactl/internal/workers"
)

// SetMemory bounds what a walk keeps in memory by the budget arenactl
// gives it (internal/budget): the copies of an arena's heaps (two buffers
// of memio's window cap, the walker's and the loader's running ahead) and the cache
// of blocks read outside them (its cache cap) take at most an eighth of it
// each, at least 8 MiB, the copies at most what they took before any
// budget (96 MiB, which holds a thread arena's whole 64 MiB heap); the
// links the prewalk of an arena copied in parts records (24 bytes each) a
// sixth of it, and never fewer than before any budget (2 M): the lists
// past them are read by the walk itself, which with a bounded cache costs
// a read per word where the lists hop over more than the cache holds.
// The table of places that look free, which such a prewalk builds when
// the lists hop between parts (prewalkParts), takes at most half as many
// entries of the same size: a twelfth. Links and entries are only held for
// free chunks there are, so the floor costs an ordinary heap nothing. The rest is left to the chunk index and the scan.
// A walk spread over jobs workers (parallel.go) gives each its own copies,
// cache and links: each gets a jobs-th of those shares (at least 4 MiB of
// copies and cache), so that what the walk holds does not grow with the
// workers. Call it before a walk, never during one.
func SetMemory(budget uint64, jobs int) {
	jobs = max(workers.Resolve(jobs), 1)
	share := budget / 8 / uint64(jobs)
	memio.SetCaps(min(max(share, 4<<20), 96<<20)&^(2<<20-1), max(share, 4<<20)) // the copies in whole huge pages
	prewalkBudgetParts = int(max(budget/6/24, 2<<20)) / jobs
}
