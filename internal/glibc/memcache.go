package glibc

import "encoding/binary"

// blockMem caches target memory in aligned blocks. The walker touches the
// same pages many times (bins hop around, chunk walks go forward); one read
// syscall per block instead of one per pointer is what makes a
// multi-gigabyte heap walkable in seconds.
type blockMem struct {
	mem    Memory
	blocks map[uint64][]byte // block start -> contents (nil: unreadable)
}

const blockSize = 256 << 10

func newBlockMem(mem Memory) *blockMem { return &blockMem{mem: mem, blocks: map[uint64][]byte{}} }

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
	b := make([]byte, blockSize)
	if n, err := c.mem.ReadAt(b, start); err != nil || n != blockSize {
		b = nil // a block that crosses the end of a mapping: read words one by one
	}
	c.blocks[start] = b
	return b
}

// ReadAt implements Memory.
func (c *blockMem) ReadAt(p []byte, addr uint64) (int, error) {
	start := addr &^ (blockSize - 1)
	if addr+uint64(len(p)) <= start+blockSize {
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
