package glibc

// SetWindowCap sets windowCap for a test, so that arenas of a few pages do
// not fit; it returns what puts it back.
func SetWindowCap(n uint64) (restore func()) {
	old := windowCap
	windowCap = n
	return func() { windowCap = old }
}

// SetSegMin sets segMin for a test, so that heaps of a few pages are walked
// in segments; it returns what puts it back.
func SetSegMin(n uint64) (restore func()) {
	old := segMin
	segMin = n
	return func() { segMin = old }
}
