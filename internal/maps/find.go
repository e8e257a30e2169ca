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

// ClipWritable is r cut to the writable memory that holds its start: the
// mapping containing r.Start and those adjoining it, writable too. It is
// empty when r.Start is in no writable mapping. A range computed from a
// heap read while the process runs (a pre-flight walk) or from a damaged
// core can take a pointer for a size; only where the heap can be is it
// asked about.
func ClipWritable(ms []Mapping, r Range) Range {
	i, ok := index(ms, r.Start)
	if !ok || !ms[i].Writable() || r.End <= r.Start {
		return Range{}
	}
	end := ms[i].End
	for j := i + 1; j < len(ms) && end < r.End && ms[j].Start == end && ms[j].Writable(); j++ {
		end = ms[j].End
	}
	return Range{Start: r.Start, End: min(r.End, end)}
}
