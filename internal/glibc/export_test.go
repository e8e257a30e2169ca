package glibc

import "github.com/arenactl/arenactl/internal/glibc/memio"

// SetWindowCap sets what one arena's copy may take for a test, so that
// arenas of a few pages do not fit; it returns what puts it back.
func SetWindowCap(n uint64) (restore func()) {
	_, cache := memio.Caps()
	return memio.SetCaps(n, cache)
}

// SetCacheLimits sets the block cache's bound and both prewalk budgets
// (links) for a test; it returns what puts them back.
func SetCacheLimits(cache uint64, links int) (restore func()) {
	window, _ := memio.Caps()
	undo := memio.SetCaps(window, cache)
	ob, op := prewalkBudget, prewalkBudgetParts
	prewalkBudget, prewalkBudgetParts = links, links
	return func() { undo(); prewalkBudget, prewalkBudgetParts = ob, op }
}

// SetSegMin sets segMin for a test, so that heaps of a few pages are walked
// in segments; it returns what puts it back.
func SetSegMin(n uint64) (restore func()) {
	old := segMin
	segMin = n
	return func() { segMin = old }
}

// SetTableFirst has the prewalk of an arena copied in parts take its lists
// through the table of free-looking places at once, before any other copy;
// it returns what puts it back.
func SetTableFirst() (restore func()) {
	old := tableAfter
	tableAfter = 0
	return func() { tableAfter = old }
}
