package glibc

// SetWindowCap sets windowCap for a test, so that arenas of a few pages do
// not fit; it returns what puts it back.
func SetWindowCap(n uint64) (restore func()) {
	old := windowCap
	windowCap = n
	return func() { windowCap = old }
}

// SetCacheLimits sets cacheCap and both prewalk budgets (links) for a
// test; it returns what puts them back.
func SetCacheLimits(cache uint64, links int) (restore func()) {
	oc, ob, op := cacheCap, prewalkBudget, prewalkBudgetParts
	cacheCap, prewalkBudget, prewalkBudgetParts = cache, links, links
	return func() { cacheCap, prewalkBudget, prewalkBudgetParts = oc, ob, op }
}

// SetSegMin sets segMin for a test, so that heaps of a few pages are walked
// in segments; it returns what puts it back.
func SetSegMin(n uint64) (restore func()) {
	old := segMin
	segMin = n
	return func() { segMin = old }
}
