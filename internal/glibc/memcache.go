package glibc

import "encoding/binary"

// blockMem caches target memory in aligned blocks. The walker touches the
// same pages many times (bins hop around, chunk walks go forward); one read
// syscall per block instead of one per pointer is what makes a
// multi-gigabyte heap walkable in seconds.
type blockMem struct {
	mem    Memory
	blocks map[uint64][]byte // block start -> contents (nil: unreadable)
	size   uint64
}

const blockSize = 256 << 10

func newBlockMem(mem Memory) *blockMem { return newBlockMemSized(mem, blockSize) }

// newBlockMemSized caches blocks of size bytes (a power of two). A walk that
// reads only chunk headers uses pages: reading the memory of a live process
// faults its pages in (the zero page, for the untouched or madvised pages of
// a free chunk), which a larger block would do to the whole chunk.
func newBlockMemSized(mem Memory, size uint64) *blockMem {
	return &blockMem{mem: mem, blocks: map[uint64][]byte{}, size: size}
}

// drop forgets cached blocks once a region has been walked, so memory use
// stays bounded by what one walk step needs.
func (c *blockMem) drop() {
	if len(c.blocks) > 256 {
		c.blocks = map[uint64][]byte{}
	}
}

func (c *blockMem) block(start uint64) []byte {
	if b, ok := c.blocks[start]; ok {
		return b
	}
	b := make([]byte, c.size)
	if n, err := c.mem.ReadAt(b, start); err != nil || uint64(n) != c.size {
		b = nil // a block that crosses the end of a mapping: read words one by one
	}
	c.blocks[start] = b
	return b
}

// ReadAt implements Memory.
func (c *blockMem) ReadAt(p []byte, addr uint64) (int, error) {
	start := addr &^ (c.size - 1)
	if addr+uint64(len(p)) <= start+c.size {
		if b := c.block(start); b != nil {
			return copy(p, b[addr-start:]), nil
		}
	}
	return c.mem.ReadAt(p, addr)
}

// word reads one little-endian word; ok is false when it is not readable.
func (c *blockMem) word(addr uint64) (uint64, bool) {
	var b [8]byte
	if _, err := c.ReadAt(b[:], addr); err != nil {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}
