package core

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to the core reader: it must answer with a
// core or an error, never a panic, and reading from what it opened must be
// safe at any address.
func FuzzOpen(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x3e\x00"))
	f.Add(minimalCore())
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "core")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Open(p)
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for _, m := range c.Mappings {
			c.ReadAt(buf, m.Start)
			c.ReadAt(buf, m.End-1)
		}
		c.Exe()
	})
}

// minimalCore is a valid x86_64 core with one segment, one thread and an
// NT_FILE entry, small enough to seed the fuzzer.
func minimalCore() []byte {
	le := func(b []byte, off int, v uint64, n int) {
		for i := 0; i < n; i++ {
			b[off+i] = byte(v >> (8 * i))
		}
	}
	note := func(typ uint32, desc []byte) []byte {
		n := make([]byte, 12+8+len(desc)+(4-len(desc)%4)%4)
		le(n, 0, 5, 4)
		le(n, 4, uint64(len(desc)), 4)
		le(n, 8, uint64(typ), 4)
		copy(n[12:], "CORE")
		copy(n[20:], desc)
		return n
	}
	prstatus := make([]byte, prstatusRegs+27*8+8)
	le(prstatus, prstatusPid, 42, 4)
	file := make([]byte, 16+24)
	le(file, 0, 1, 8)
	le(file, 8, 4096, 8)
	le(file, 16, 0x400000, 8)
	le(file, 24, 0x401000, 8)
	file = append(file, "/bin/x\x00"...)
	notes := append(note(ntPrstatus, prstatus), note(ntFile, file)...)

	const ehsize, phsize = 64, 56
	b := make([]byte, ehsize+2*phsize)
	copy(b, "\x7fELF\x02\x01\x01")
	le(b, 16, 4, 2)  // ET_CORE
	le(b, 18, 62, 2) // EM_X86_64
	le(b, 20, 1, 4)
	le(b, 32, ehsize, 8)
	le(b, 52, ehsize, 2)
	le(b, 54, phsize, 2)
	le(b, 56, 2, 2)
	noteOff := uint64(len(b))
	loadOff := noteOff + uint64(len(notes))
	ph := b[ehsize:]
	le(ph, 0, 4, 4) // PT_NOTE
	le(ph, 8, noteOff, 8)
	le(ph, 32, uint64(len(notes)), 8)
	ph = b[ehsize+phsize:]
	le(ph, 0, 1, 4) // PT_LOAD
	le(ph, 4, 6, 4) // RW
	le(ph, 8, loadOff, 8)
	le(ph, 16, 0x400000, 8)
	le(ph, 32, 4096, 8)
	le(ph, 40, 4096, 8)
	b = append(b, notes...)
	return append(b, make([]byte, 4096)...)
}

func TestMinimalCore(t *testing.T) {
	p := filepath.Join(t.TempDir(), "core")
	os.WriteFile(p, minimalCore(), 0o644)
	c, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Threads) != 1 || c.Threads[0].Tid != 42 || len(c.Mappings) != 1 || c.Mappings[0].Path != "/bin/x" {
		t.Fatalf("threads %+v mappings %+v", c.Threads, c.Mappings)
	}
}
