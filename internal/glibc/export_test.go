package glibc

// SetWindowCap sets windowCap for a test, so that arenas of a few pages do
// not fit; it returns what puts it back.
func SetWindowCap(n uint64) (restore func()) {
	old := windowCap
	windowCap = n
	return func() { windowCap = old }
}
