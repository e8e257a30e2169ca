package core

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to the core reader: it must answer with a
// core or an error, never a panic, and reading from what it opened must be
// safe at any address. Plain input is read from memory (OpenBytes);
// compressed input goes through a file, one per fuzzing process reused for
// every input, so that an exec costs microseconds, not a temporary
// directory.
func FuzzOpen(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x3e\x00"))
	f.Add(minimalCore())
	for _, b := range crashers() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c *Core
		var err error
		if compressed(b) {
			p := scratchFile(t, b)
			// A small limit: an input that unpacks to gigabytes is
			// refused the same way, only later.
			c, err = OpenContext(context.Background(), p, Options{MaxUnpacked: 64 << 20})
		} else {
			c, err = OpenBytes("fuzz", b)
		}
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
		c.StackPointers()
	})
}

func compressed(b []byte) bool {
	return bytes.HasPrefix(b, magicZstd) || bytes.HasPrefix(b, magicGzip) || bytes.HasPrefix(b, magicXz)
}

var scratch struct {
	once sync.Once
	f    *os.File
	err  error
}

// scratchFile holds b in this process's one scratch file, unlinked at once
// (nothing is left when the fuzzer kills its workers) and opened again
// through /proc/self/fd.
func scratchFile(t *testing.T, b []byte) string {
	scratch.once.Do(func() {
		scratch.f, scratch.err = os.CreateTemp("", "fuzz-core-")
		if scratch.err == nil {
			os.Remove(scratch.f.Name())
		}
	})
	if scratch.err != nil {
		t.Fatal(scratch.err)
	}
	if err := scratch.f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := scratch.f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("/proc/self/fd/%d", scratch.f.Fd())
}

// crashers are the crafted inputs that crashed or hung arenactl (issue
// 12), by name; testdata/fuzz/FuzzOpen holds them too
// (ARENACTL_WRITE_CORPUS=1 go test -run TestWriteCorpus rewrites them).
func crashers() map[string][]byte {
	le := binary.LittleEndian
	out := map[string][]byte{}

	// NT_FILE of 48 bytes claiming 2 files: 16+2*24 > 48.
	b := minimalCore()
	nt := noteOffset(b, ntFile)
	le.PutUint32(b[nt+4:], 48)
	le.PutUint64(b[nt+20:], 2)
	out["ntfile-48-bytes-2-files"] = b

	// A segment claiming 2^45 bytes of memory (reads must stay bounded),
	// and one wrapping around the address space.
	b = coreClaiming(4096)
	le.PutUint64(b[64+56+40:], 1<<45)
	out["segment-2e45"] = b
	b = coreClaiming(4096)
	le.PutUint64(b[64+56+40:], ^uint64(0)-0x3fffff)
	out["segment-wraps"] = b

	// Compressed bombs: zeros, and a core whose headers claim 1 TiB.
	out["zstd-zeros"] = compressors["zstd"](make([]byte, 1<<20))
	out["gzip-zeros"] = compressors["gzip"](make([]byte, 1<<20))
	out["xz-claims-1TiB"] = compressors["xz"](coreClaiming(1 << 40))
	out["zstd-truncated"] = compressors["zstd"](minimalCore())[:200]
	return out
}

// noteOffset is where the note of type typ starts in minimalCore's layout.
func noteOffset(b []byte, typ uint32) int {
	off := int(binary.LittleEndian.Uint64(b[64+8:])) // PT_NOTE's p_offset
	end := off + int(binary.LittleEndian.Uint64(b[64+32:]))
	for off+12 <= end {
		namesz, descsz := int(binary.LittleEndian.Uint32(b[off:])), int(binary.LittleEndian.Uint32(b[off+4:]))
		if binary.LittleEndian.Uint32(b[off+8:]) == typ {
			return off
		}
		off += 12 + (namesz+3)&^3 + (descsz+3)&^3
	}
	panic("no such note")
}

// TestWriteCorpus writes the crashers into the committed corpus, when
// asked to.
func TestWriteCorpus(t *testing.T) {
	if os.Getenv("ARENACTL_WRITE_CORPUS") == "" {
		t.Skip("ARENACTL_WRITE_CORPUS=1 rewrites testdata/fuzz/FuzzOpen's crashers")
	}
	for name, b := range crashers() {
		p := filepath.Join("testdata", "fuzz", "FuzzOpen", name)
		if err := os.WriteFile(p, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Each crasher now gets an error or a core, and the ones that crashed get
// the error that names them.
func TestCrashers(t *testing.T) {
	privateTmp(t)
	want := map[string]string{
		"ntfile-48-bytes-2-files": "NT_FILE claims 2 files",
		"segment-wraps":           "past the end of the address space",
		"zstd-zeros":              "does not hold an ELF file",
		"gzip-zeros":              "does not hold an ELF file",
		"xz-claims-1TiB":          "more than the limit",
		"zstd-truncated":          "truncated",
	}
	for name, b := range crashers() {
		p := writeFile(t, name, b)
		c, err := Open(p)
		if w, ok := want[name]; ok {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want %q", name, err, w)
			}
		} else if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err == nil {
			buf := make([]byte, 64)
			for _, m := range c.Mappings {
				c.ReadAt(buf, m.End-64)
			}
			c.Close()
		}
	}
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
