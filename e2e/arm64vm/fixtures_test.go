package arm64vm

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/testutil"
)

// TestFixturesHoldTogether checks the committed arm64 fixtures
// (testdata/cores/arm64) on any machine, with debug/elf rather than
// arenactl's reader: each core is an aarch64 core whose executable, libc
// and loader the sysroot holds at the paths it records, libc's first page in the core is
// the sysroot's libc (so its build-id and the debug file's name are the
// core's), and the truths parse: a fixture remade in part fails here, not
// in the tests that read it.
func TestFixturesHoldTogether(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arm64")
	sysroot := filepath.Join(dir, "sysroot")
	libc := filepath.Join(sysroot, "usr", "lib", "aarch64-linux-gnu", "libc.so.6")
	lf, err := elf.Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if lf.Machine != elf.EM_AARCH64 {
		t.Fatalf("%s is for %v", libc, lf.Machine)
	}
	id := buildID(t, lf)
	if _, err := os.Stat(filepath.Join(sysroot, "usr", "lib", "debug", ".build-id", id[:2], id[2:]+".debug")); err != nil {
		t.Errorf("no debug file for libc's build-id %s: %v", id, err)
	}
	libcHead, err := os.ReadFile(libc)
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"arenas-2.36-kernel", "heapobjs-2.36-kernel", "arenas-2.36-16k-kernel", "heapobjs-2.36-16k-kernel"} {
		t.Run(name, func(t *testing.T) {
			z, err := os.ReadFile(filepath.Join(dir, name+".core.zst"))
			if err != nil {
				t.Fatal(err)
			}
			dec, _ := zstd.NewReader(nil)
			defer dec.Close()
			raw, err := dec.DecodeAll(z, nil)
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.NewFile(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != elf.ET_CORE || f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 {
				t.Fatalf("%v %v %v, not a 64-bit aarch64 core", f.Type, f.Machine, f.Class)
			}
			files := mappedFiles(t, f, raw)
			sawLibc := false
			for path, start := range files {
				// heapobjs's C++ runtime (libstdc++, libgcc_s, libm) is
				// left out on purpose (testdata/cores/arm64/README.md).
				kept := strings.HasPrefix(path, "/job/") || strings.HasSuffix(path, "/libc.so.6") || strings.HasSuffix(path, "/ld-linux-aarch64.so.1")
				if _, err := os.Stat(filepath.Join(sysroot, path)); err != nil && kept {
					t.Errorf("the core maps %s; the sysroot has no such file", path)
				}
				if strings.HasSuffix(path, "/libc.so.6") {
					sawLibc = true
					page := make([]byte, 4096) // within the first page at any page size
					if n, _ := readCore(f, start, page); n != len(page) || !bytes.Equal(page, libcHead[:len(page)]) {
						t.Errorf("libc's first page in the core (at %#x) is not the sysroot's libc", start)
					}
				}
			}
			if !sawLibc {
				t.Errorf("the core maps no libc.so.6: %v", files)
			}
			switch {
			case strings.HasPrefix(name, "arenas"):
				xml, err := os.ReadFile(filepath.Join(dir, name+".xml"))
				if err != nil {
					t.Fatal(err)
				}
				mi, err := mallocinfo.Parse(xml)
				if err != nil || len(mi.Arenas) != 3 {
					t.Errorf("its XML: %v, %d arenas (want main_arena and 2 workers')", err, len(mi.Arenas))
				}
			default:
				truth, err := os.ReadFile(filepath.Join(dir, name+".truth"))
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(string(truth)), "\n")
				if len(lines) < 16 || !strings.HasPrefix(lines[len(lines)-1], "pin 0x") {
					t.Errorf("its truth: %d lines, the last %q", len(lines), lines[len(lines)-1])
				}
			}
		})
	}
}

func buildID(t *testing.T, f *elf.File) string {
	t.Helper()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		t.Fatal("libc has no build-id")
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		t.Fatalf("build-id note: %v", err)
	}
	namesz := binary.LittleEndian.Uint32(b)
	return hex.EncodeToString(b[12+(namesz+3)&^3:])
}

// mappedFiles reads the core's NT_FILE note: each file's path and the start
// of its first mapping (file offset 0).
func mappedFiles(t *testing.T, f *elf.File, raw []byte) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes := raw[p.Off : p.Off+p.Filesz]
		for len(notes) >= 12 {
			namesz, descsz, typ := binary.LittleEndian.Uint32(notes), binary.LittleEndian.Uint32(notes[4:]), binary.LittleEndian.Uint32(notes[8:])
			descOff := 12 + (namesz+3)&^3
			end := descOff + (descsz+3)&^3
			if uint64(end) > uint64(len(notes)) {
				t.Fatal("a truncated note")
			}
			if typ == 0x46494c45 { // NT_FILE
				desc := notes[descOff : descOff+descsz]
				count := binary.LittleEndian.Uint64(desc)
				names := strings.Split(string(desc[16+24*count:]), "\x00")
				for i := uint64(0); i < count && int(i) < len(names); i++ {
					e := desc[16+24*i:]
					start, off := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[16:])
					if _, ok := out[names[i]]; !ok && off == 0 {
						out[names[i]] = start
					}
				}
			}
			notes = notes[end:]
		}
	}
	if len(out) == 0 {
		t.Fatal("no NT_FILE note")
	}
	return out
}

// readCore reads the core's memory at addr from its PT_LOAD segments.
func readCore(f *elf.File, addr uint64, b []byte) (int, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr+uint64(len(b)) <= p.Vaddr+p.Filesz {
			return p.ReadAt(b, int64(addr-p.Vaddr))
		}
	}
	return 0, os.ErrNotExist
}
