package reach

import (
	"encoding/binary"
	"errors"
	"github.com/arenactl/arenactl/internal/arch"
	"os"
	"testing"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
)

// flat is a target of one range of memory.
type flat struct {
	base uint64
	b    []byte
}

func (f *flat) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < f.base || addr >= f.base+uint64(len(f.b)) {
		return 0, errors.New("unmapped")
	}
	n := copy(p, f.b[addr-f.base:])
	if n < len(p) {
		return n, errors.New("short")
	}
	return n, nil
}
func (f *flat) Process() debuggee.Process               { return debuggee.Process{} }
func (f *flat) Mappings() []maps.Mapping                { return nil }
func (f *flat) Threads() []debuggee.Thread              { return nil }
func (f *flat) Arch() *arch.Arch                        { return arch.AMD64 }
func (f *flat) OpenFile(maps.Mapping) (*os.File, error) { return nil, os.ErrNotExist }
func (f *flat) Close() error                            { return nil }

func (f *flat) put(addr, v uint64) { binary.LittleEndian.PutUint64(f.b[addr-f.base:], v) }

// A thread's static TLS reaches down to the lowest block its DTV places
// below the thread pointer and above its stack pointer; blocks elsewhere
// (the heap, unallocated), a DTV that cannot be read and a hostile length
// change nothing or cost one bounded read.
func TestDTVBelow(t *testing.T) {
	const base = 0x7f0000000000
	f := &flat{base: base, b: make([]byte, 64<<10)}
	m := maps.Mapping{Start: base, End: base + 48<<10, Perms: "rw-p"}
	fs, sp := uint64(base+40<<10), uint64(base+8<<10)
	dtv := uint64(base + 56<<10) // in the heap, outside m
	f.put(fs, fs)                // tcbhead_t.tcb
	f.put(fs+8, dtv)
	f.put(dtv-16, 6) // length
	f.put(dtv, 1)    // generation
	f.put(dtv+16*1, fs-0x80)
	f.put(dtv+16*2, fs-0x150)   // libc's block, the lowest
	f.put(dtv+16*3, dtv+0x400)  // a module loaded later: in the heap
	f.put(dtv+16*4, ^uint64(0)) // TLS_DTV_UNALLOCATED
	f.put(dtv+16*5, sp-0x100)   // below the stack pointer: not TLS
	if got := dtvBelow(f, m, fs, sp); got != 0x150 {
		t.Errorf("below %#x, want 0x150", got)
	}
	f.put(dtv-16, 1<<62) // hostile length: read what there is
	if got := dtvBelow(f, m, fs, sp); got != 0x150 {
		t.Errorf("with a hostile length, below %#x, want 0x150", got)
	}
	f.put(fs+8, 0x1000) // a DTV that cannot be read
	if got := dtvBelow(f, m, fs, sp); got != 0 {
		t.Errorf("with no DTV, below %#x", got)
	}
}

// A thread control block that does not point at itself is not there: a
// core that holds it as zeros.
func TestTCBAt(t *testing.T) {
	const base = 0x7f0000000000
	f := &flat{base: base, b: make([]byte, 16<<10)}
	fs := uint64(base + 8<<10)
	if tcbAt(f, fs) {
		t.Error("a TCB of zeros is there")
	}
	f.put(fs, fs)
	if !tcbAt(f, fs) {
		t.Error("a TCB that points at itself is not there")
	}
	if tcbAt(f, base+64<<10) {
		t.Error("an unmapped TCB is there")
	}
}
