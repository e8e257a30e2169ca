package walk

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/arenactl/arenactl/internal/testutil"
)

// stripNTFile returns the core b without its NT_FILE note, as gdb's gcore
// before 8.0 and other dumpers write them: the notes after it move up and
// PT_NOTE's size shrinks; nothing else changes.
func stripNTFile(t *testing.T, b []byte) []byte {
	t.Helper()
	b = bytes.Clone(b)
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(b[32:]), uint64(le.Uint16(b[54:])), uint64(le.Uint16(b[56:]))
	stripped := false
	for i := uint64(0); i < phnum; i++ {
		ph := b[phoff+i*phentsize:]
		if le.Uint32(ph) != 4 { // PT_NOTE
			continue
		}
		off, size := le.Uint64(ph[8:]), le.Uint64(ph[32:])
		notes := b[off : off+size]
		var kept []byte
		for len(notes) >= 12 {
			namesz, descsz, typ := uint64(le.Uint32(notes)), uint64(le.Uint32(notes[4:])), le.Uint32(notes[8:])
			end := 12 + (namesz+3)&^3 + (descsz+3)&^3
			if typ == 0x46494c45 { // NT_FILE
				stripped = true
			} else {
				kept = append(kept, notes[:end]...)
			}
			notes = notes[end:]
		}
		copy(b[off:], kept)
		le.PutUint64(ph[32:], uint64(len(kept)))
	}
	if !stripped {
		t.Fatal("the core has no NT_FILE note to strip")
	}
	return b
}

// asOldGcore makes the core b look like one of gdb's gcore before 8.0:
// no NT_FILE, and no page of a read-only file mapping (gcore leaves out
// what the files hold, ELF headers included), so neither the executable's
// program headers nor ld.so's and libc's are in it.
func asOldGcore(t *testing.T, b []byte) []byte {
	t.Helper()
	b = stripNTFile(t, b)
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(b[32:]), uint64(le.Uint16(b[54:])), uint64(le.Uint16(b[56:]))
	dropped := 0
	for i := uint64(0); i < phnum; i++ {
		ph := b[phoff+i*phentsize:]
		// PT_LOAD, not writable, with file contents: a file's read-only
		// page the kernel dumped (its ELF header).
		if le.Uint32(ph) == 1 && le.Uint32(ph[4:])&2 == 0 && le.Uint64(ph[32:]) > 0 && le.Uint32(ph[4:])&4 != 0 {
			le.PutUint64(ph[32:], 0)
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatal("no read-only page to drop")
	}
	return b
}

// A core without an NT_FILE note is read as one with it: the loaded objects
// are found in its memory through the executable's DT_DEBUG, r_debug and
// ld.so's link_map list, as gdb and chap find them, so libc is found and
// the walk gives the same malloc_info (issue 22, item 18).
func TestCoreWithoutNTFile(t *testing.T) {
	empty := t.TempDir()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for _, fx := range testutil.CoreFixtures(t) {
		if fx.Kind != "kernel" {
			continue
		}
		t.Run(fx.Version, func(t *testing.T) {
			z, err := os.ReadFile(fx.Core)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := dec.DecodeAll(z, nil)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "no-nt-file.core")
			if err := os.WriteFile(path, stripNTFile(t, raw), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"info", "--sysroot", empty, "--debug-dir", empty, "--no-libc-file"}
			want := mustRun(t, append(args, "--xml", fx.Core)...).Stdout
			if got := mustRun(t, append(args, "--xml", path)...).Stdout; got != want {
				t.Fatalf("without NT_FILE the walk differs\n--- with\n%s\n--- without\n%s", want, got)
			}
			out := mustRun(t, append(args, path)...).Stdout
			if !strings.Contains(out, "no NT_FILE note: its objects were found through the executable's DT_DEBUG") ||
				!strings.Contains(out, "/libc.so.6)") {
				t.Errorf("the report does not say how the objects were found, or names no libc:\n%s", out)
			}
			// As old gcores are, without the ELF headers either: r_debug is
			// found in ld.so's data by its contents, and each object's
			// segments from its link_map entry.
			old := filepath.Join(t.TempDir(), "old-gcore.core")
			if err := os.WriteFile(old, asOldGcore(t, raw), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := mustRun(t, append(args, "--xml", old)...).Stdout; got != want {
				t.Fatalf("as an old gcore the walk differs\n--- with\n%s\n--- without\n%s", want, got)
			}
			// With libc's file, when this machine has that build: found by
			// the path link_map gave, checked by build-id.
			if testutil.LibcFileFor(t, fx.Version) != "" {
				lib := mustRun(t, "info", "--xml", "--libc", testutil.LibcFileFor(t, fx.Version), path)
				if lib.Stdout != want && !strings.Contains(lib.Stdout, "<malloc") {
					t.Errorf("with --libc: %s", lib.Stderr)
				}
			}
		})
	}
}

// A library linked to load at a fixed address, as prelink placed Red Hat's
// libc (at 0x30ed600000 in the old gcores of a peer's public test suite),
// has l_addr 0 in its link_map, so its ELF header is not at l_addr: without
// NT_FILE its ranges come from the header at the start of the core segment
// below its dynamic section. Before, such an object was not found at all,
// and a core whose libc was one read as a static program's.
func TestCoreWithoutNTFileFixedAddress(t *testing.T) {
	const at = 0x5f0000000000
	built, err := os.ReadFile(testutil.BuildC(t, "fixedlib.c", "-shared", "-fPIC", fmt.Sprintf("-Wl,-Ttext-segment=%#x", at)))
	if err != nil {
		t.Fatal(err)
	}
	// A copy of its own, removed once the core is made: no file to read
	// its headers from, as on another machine than the core's.
	lib := filepath.Join(t.TempDir(), "libfixed.so")
	if err := os.WriteFile(lib, built, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := testutil.BuildC(t, "fixedlib_main.c", lib)
	core, want := crashCore(t, exec.Command(bin))
	raw, err := os.ReadFile(core)
	if err != nil {
		t.Fatal(err)
	}
	var rep jsonMapsReport
	if err := json.Unmarshal([]byte(mustRun(t, "maps", "--all", "--json", core).Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Mappings, func(m jsonMapping) bool { return m.Start == at && m.Path == lib }) {
		t.Skipf("the library was not loaded at %#x (the place was taken)", at)
	}
	if err := os.Remove(lib); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for name, b := range map[string][]byte{"no NT_FILE": stripNTFile(t, raw), "old gcore": asOldGcore(t, raw)} {
		path := filepath.Join(t.TempDir(), "stripped.core")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var got jsonMapsReport
		if err := json.Unmarshal([]byte(mustRun(t, "maps", "--all", "--json", path).Stdout), &got); err != nil {
			t.Fatal(err)
		}
		found := slices.ContainsFunc(got.Mappings, func(m jsonMapping) bool { return m.Start <= at && at < m.End && m.Path == lib })
		if name == "no NT_FILE" && !found {
			t.Errorf("%s: the library at %#x is not among the mappings", name, at)
		}
		if x := mustRun(t, "info", "--xml", "--sysroot", empty, "--no-libc-file", path).Stdout; x != string(want) {
			t.Errorf("%s: the walk differs from glibc's malloc_info\n--- glibc\n%s\n--- core\n%s", name, want, x)
		}
	}
}
