package maps

import "sort"

// Find returns the mapping containing addr. ms must be sorted by Start and
// not overlap, as the kernel prints them.
func Find(ms []Mapping, addr uint64) (Mapping, bool) {
	i, ok := index(ms, addr)
	if !ok {
		return Mapping{}, false
	}
	return ms[i], true
}

// index is Find returning the position, for callers that update ms[i].
func index(ms []Mapping, addr uint64) (int, bool) {
	// The first mapping ending above addr is the only one that can hold it.
	i := sort.Search(len(ms), func(i int) bool { return ms[i].End > addr })
	if i < len(ms) && ms[i].Contains(addr) {
		return i, true
	}
	return 0, false
}
