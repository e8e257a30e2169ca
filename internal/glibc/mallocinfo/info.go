// Package mallocinfo owns glibc's malloc_info(0, fp) XML: the document as
// numbers (Info: per arena and in all), its strict parser, and its
// rendering byte for byte as each glibc version prints it (Format, which
// layouts.Layout carries per version). It knows nothing of how the numbers
// were obtained: glibc's own call (internal/glibc/inject) and the
// read-only walk (internal/glibc) both give an Info.
package mallocinfo

// SizeClass is one <size> or <unsorted> line of malloc_info.
//
// For fastbins glibc prints a bucket (From = To-15, Total = Count*To). For
// the other bins it prints the smallest and largest raw size field seen,
// flag bits included, and Total is the sum of raw size fields.
type SizeClass struct {
	From, To, Total, Count uint64
	Fast                   bool // a fastbin bucket rather than a regular bin
}

// Arena is one <heap> of malloc_info: an arena with its free-chunk summary.
type Arena struct {
	Index    int         // heap nr; 0 is main_arena
	Sizes    []SizeClass // <size> lines in glibc order: fastbins, then bins 2..127
	Unsorted *SizeClass  // <unsorted>, nil when absent (the unsorted bin was empty)

	// HasFast is false on glibc 2.43, which has no fastbins and prints no
	// fast totals.
	HasFast              bool
	FastCount, FastBytes uint64
	// Rest covers every regular bin, the unsorted bin included, and from
	// 2.31 on the top chunk as well (one more chunk).
	RestCount, RestBytes uint64

	SystemCurrent, SystemMax    uint64
	AspaceTotal, AspaceMprotect uint64
	// Subheaps is the number of heaps of a non-main arena; glibc prints it
	// from 2.27 on.
	Subheaps    uint64
	HasSubheaps bool
}

// FreeBytes is what glibc counts as free in the arena: fastbins plus rest.
// Chunks cached in a thread's tcache are not included: glibc counts them as
// in use.
func (a *Arena) FreeBytes() uint64 { return a.FastBytes + a.RestBytes }

// InUse is what the arena holds from the system and has not free in any
// list: system - free. Chunks cached in threads' tcaches count as in use,
// as malloc_info counts them.
func (a *Arena) InUse() uint64 { return a.SystemCurrent - min(a.SystemCurrent, a.FreeBytes()) }

// FreeChunks is the number of free chunks glibc counted: fastbins plus rest.
func (a *Arena) FreeChunks() uint64 { return a.FastCount + a.RestCount }

// FreePercent is FreeBytes as a percentage of the memory the arena holds
// from the system; 0 when the arena holds none.
func (a *Arena) FreePercent() float64 {
	if a.SystemCurrent == 0 {
		return 0
	}
	return 100 * float64(a.FreeBytes()) / float64(a.SystemCurrent)
}

// LargestFreeClass is the largest chunk size glibc reports as free in the
// arena, with the chunk flag bits that glibc leaves in raw sizes masked off.
// It does not know about the top chunk.
func (a *Arena) LargestFreeClass() uint64 {
	var max uint64
	for _, s := range a.Sizes {
		max = maxU64(max, s.To&^7)
	}
	if a.Unsorted != nil {
		max = maxU64(max, a.Unsorted.To&^7)
	}
	return max
}

func maxU64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// Info is the parsed output of glibc's malloc_info(0, fp).
type Info struct {
	Arenas []Arena // in ring order, starting at main_arena

	// The global trailer: sums over the arenas, as glibc printed them.
	HasFast              bool // false on 2.43
	FastCount, FastBytes uint64
	RestCount, RestBytes uint64
	// HasMmap is false up to 2.19, which does not print <total type="mmap">.
	HasMmap              bool
	MmapCount, MmapBytes uint64
	SystemCurrent        uint64
	SystemMax            uint64
	AspaceTotal          uint64
	AspaceMprotect       uint64

	Raw []byte // the XML exactly as read
}

// FreeBytes is the free memory of every arena, as glibc's trailer sums it.
func (m *Info) FreeBytes() uint64 { return m.FastBytes + m.RestBytes }

// InUse is system - free over every arena.
func (m *Info) InUse() uint64 { return m.SystemCurrent - min(m.SystemCurrent, m.FreeBytes()) }

// FreePercent is FreeBytes as a percentage of SystemCurrent; 0 when the
// process holds nothing from the system.
func (m *Info) FreePercent() float64 {
	if m.SystemCurrent == 0 {
		return 0
	}
	return 100 * float64(m.FreeBytes()) / float64(m.SystemCurrent)
}
