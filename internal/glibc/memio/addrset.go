package memio

// AddrSet is a set of chunk addresses: one bit per 16-byte granule, in a
// bitmap per 64 MiB region of address space, allocated when the region is
// first used. The walker marks and tests millions of chunks (every free
// chunk, then every chunk of every heap): a bitmap costs 8 bytes per KiB of
// address space and keeps neighbouring chunks in one cache line, where a Go
// map costs tens of bytes per entry and a cache miss per lookup. Addresses
// that are not 16-aligned (only damage yields them) go to a map.
type AddrSet struct {
	bits regionMap[uint64]
	odd  map[uint64]bool
}

// NewAddrSet is an empty set.
func NewAddrSet() *AddrSet { return &AddrSet{bits: newRegionMap[uint64](RegionSize / 16 / 64)} }

// Add puts a in the set.
func (s *AddrSet) Add(a uint64) {
	if a%16 != 0 {
		if s.odd == nil {
			s.odd = map[uint64]bool{}
		}
		s.odd[a] = true
		return
	}
	g := a % RegionSize / 16
	s.bits.get(a, true)[g/64] |= 1 << (g % 64)
}

// Has reports whether a is in the set; a nil set is empty.
func (s *AddrSet) Has(a uint64) bool {
	if s == nil {
		return false
	}
	if a%16 != 0 {
		return s.odd[a]
	}
	b := s.bits.get(a, false)
	g := a % RegionSize / 16
	return b != nil && b[g/64]&(1<<(g%64)) != 0
}

// SetOf is the set of the keys of m that are true.
func SetOf(m map[uint64]bool) *AddrSet {
	if len(m) == 0 {
		return nil
	}
	s := NewAddrSet()
	for a, ok := range m {
		if ok {
			s.Add(a)
		}
	}
	return s
}

// Region is the bitmap of a's 64 MiB region (bit g%64 of word g/64 for the
// granule g = a%RegionSize/16), nil when the set has none there.
func (s *AddrSet) Region(a uint64) []uint64 {
	if s == nil {
		return nil
	}
	return s.bits.get(a, false)
}

// Reader is a view of s for one more goroutine to test, never to add to:
// it shares s's bitmaps but remembers its own last region (regionMap.get
// writes that on every change of region, so two goroutines cannot share
// one).
func (s *AddrSet) Reader() *AddrSet {
	if s == nil {
		return nil
	}
	return &AddrSet{bits: regionMap[uint64]{m: s.bits.m, n: s.bits.n}, odd: s.odd}
}

// Clear empties the set.
func (s *AddrSet) Clear() {
	s.bits.reset()
	s.odd = nil
}
