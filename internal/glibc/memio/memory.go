package memio

// Memory reads the target's address space: a live process or a core file
// (glibc.Memory is the same interface).
type Memory interface {
	ReadAt(p []byte, addr uint64) (int, error)
}

// DataRuns is memory that can tell which of its pages hold data: present or
// swapped, as opposed to never touched or given back (which read as zeros).
// A live process does, from /proc/PID/pagemap. Reading a page that holds
// no data of a live process maps the zero page into it, so the list walk
// (which must leave the pages malloc_trim gave back alone) copies only the
// pages that hold data, and reads the others one by one if it needs them.
type DataRuns interface {
	DataRuns(start, end uint64, fn func(start, end uint64, data bool)) error
}

// pageSize is the unit of copies and of their holes: the host's page, which
// is what DataRuns (the kernel's page map) tells of.
const pageSize = 4096

// SetCaps sets what one arena's copy may take (window, in whole pages) and
// what the block cache keeps (cache): glibc.SetMemory sets them from
// arenactl's memory budget, tests to make arenas of a few pages too large
// to copy whole. It returns what puts them back. Call it
// before a walk, never during one.
func SetCaps(window, cache uint64) (restore func()) {
	ow, oc := windowCap, cacheCap
	windowCap, cacheCap = window, cache
	return func() { windowCap, cacheCap = ow, oc }
}

// Caps returns what SetCaps set.
func Caps() (window, cache uint64) { return windowCap, cacheCap }
