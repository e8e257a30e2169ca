package core

import (
	"sort"

	"golang.org/x/sys/unix"
)

// Slice returns the core's bytes for [addr, addr+n) without copying them,
// when they lie whole in one segment's dumped part; nil otherwise (read
// those with ReadAt). The slice is the mapped file: valid until Close.
func (c *Core) Slice(addr, n uint64) []byte {
	i := sort.Search(len(c.segs), func(i int) bool { return c.segs[i].Vaddr+c.segs[i].Memsz > addr })
	if i == len(c.segs) || c.segs[i].Vaddr > addr {
		return nil
	}
	s := c.segs[i]
	if off := addr - s.Vaddr; off+n <= s.Filesz && off+n >= off {
		return c.data[s.Off+off : s.Off+off+n : s.Off+off+n]
	}
	return nil
}

// Release gives back the pages of the mapped file that reading touched, so
// that walking a core larger than memory does not keep it all resident in
// this process: they stay in the page cache, and slices stay valid (a page
// touched again is mapped again).
func (c *Core) Release() {
	if c.mapped { // never on OpenBytes's memory: it would read as zeros
		unix.Madvise(c.data, unix.MADV_DONTNEED)
	}
}

// Slice is Core.Slice: the bytes the core holds, never a file's.
func (w *WithFiles) Slice(addr, n uint64) []byte { return w.c.Slice(addr, n) }

// Release is Core.Release.
func (w *WithFiles) Release() { w.c.Release() }
