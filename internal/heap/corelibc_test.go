package heap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The tests open the committed cores of testdata/cores (real processes'
// memory, glibc 2.31 to 2.43) and the libc files at hand: the system's and
// those of scripts/fetch-glibc.sh. They check OpenCore's own policy, the
// order in which a core's libc is looked for and that a file of another
// build is never used; internal/glibc's tests check the walks themselves.

// openCore opens a fixture under sysroot and locates its allocator.
func openCore(t *testing.T, path, sysroot string, o heap.Options) *heap.Heap {
	t.Helper()
	c, err := core.OpenTarget(path, sysroot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h, err := heap.OpenCore(c, o)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h
}

// libcs is every glibc version with a libc file here, by version.
func libcs(t *testing.T) map[string]string {
	m := map[string]string{}
	for _, v := range []string{"2.31", "2.36", "2.41", "2.43"} {
		if f := testutil.LibcFileFor(t, v); f != "" {
			m[v] = f
		}
	}
	return m
}

// A snapshot is read through its allocator note alone: no libc file, no
// note of one tried, every thread's tcache readable.
func TestOpenCoreSnapshotNeedsNoFile(t *testing.T) {
	for _, fx := range testutil.CoreFixtures(t) {
		if fx.Kind != "snapshot" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			h := openCore(t, fx.Core, t.TempDir(), heap.Options{NoLibcFile: true})
			if h.Libc.Source != glibc.SourceRecord || h.Libc.Version.String() != fx.Version {
				t.Errorf("libc %s from %q, want %s from the snapshot's note", h.Libc.Version, h.Libc.Source, fx.Version)
			}
			if len(h.LibcNotes) != 0 || h.TcachesSkipped != "" || !h.SameFormat {
				t.Errorf("notes %q, tcaches skipped %q, same format %v", h.LibcNotes, h.TcachesSkipped, h.SameFormat)
			}
		})
	}
}

// Without a libc file, a kernel core's allocator is found from memory, the
// notes say no file was looked for, and the tcaches are said to be skipped
// (their TLS slots are in libc's file).
func TestOpenCoreMemoryAlone(t *testing.T) {
	for _, fx := range testutil.CoreFixtures(t) {
		if fx.Kind != "kernel" {
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			h := openCore(t, fx.Core, t.TempDir(), heap.Options{NoLibcFile: true})
			if h.Libc.Source != glibc.SourceMemory {
				t.Errorf("libc from %q, want memory", h.Libc.Source)
			}
			if len(h.LibcNotes) == 0 || !strings.Contains(h.LibcNotes[0], "none looked for") {
				t.Errorf("notes %q do not say no file was looked for", h.LibcNotes)
			}
			if h.TcachesSkipped == "" {
				t.Error("tcaches not said to be skipped without libc's file")
			}
		})
	}
}

// A libc file of another build is never used, whether given (--libc) or
// found where the core recorded its libc under the sysroot: its offsets
// are another libc's. The core is read from memory and the notes name the
// file refused.
func TestOpenCoreRefusesAnotherBuild(t *testing.T) {
	have := libcs(t)
	for _, fx := range testutil.CoreFixtures(t) {
		if fx.Kind != "kernel" {
			continue
		}
		var other string
		for v, f := range have {
			if v != fx.Version {
				other = f
				break
			}
		}
		if other == "" {
			t.Logf("%s: no libc of another version here", fx.Name)
			continue
		}
		t.Run(fx.Name, func(t *testing.T) {
			h := openCore(t, fx.Core, t.TempDir(), heap.Options{LibcFile: other})
			if h.Libc.Source != glibc.SourceMemory || !notesName(h.LibcNotes, other) {
				t.Errorf("given %s: libc from %q, notes %q", other, h.Libc.Source, h.LibcNotes)
			}

			// The same file where the core says its libc was.
			c, err := core.OpenTarget(fx.Core, "")
			if err != nil {
				t.Fatal(err)
			}
			first, ok := libc.LibcMapping(c.Mappings())
			c.Close()
			if !ok {
				t.Fatal("no libc mapping in the core")
			}
			sysroot := t.TempDir()
			planted := filepath.Join(sysroot, strings.TrimSuffix(first.Path, " (deleted)"))
			copyFile(t, other, planted)
			h = openCore(t, fx.Core, sysroot, heap.Options{})
			if h.Libc.Source != glibc.SourceMemory || !notesName(h.LibcNotes, planted) {
				t.Errorf("%s under the sysroot: libc from %q, notes %q", other, h.Libc.Source, h.LibcNotes)
			}
		})
	}
}

// The core's own libc is found by its build-id in a debug directory
// (DIR/.build-id/xx/rest, where gdb looks) when it is not where the core
// recorded it; the missing recorded path is noted.
func TestOpenCoreFindsLibcByBuildID(t *testing.T) {
	have := libcs(t)
	found := 0
	for _, fx := range testutil.CoreFixtures(t) {
		f := have[fx.Version]
		if fx.Kind != "kernel" || f == "" {
			continue
		}
		c, err := core.OpenTarget(fx.Core, "")
		if err != nil {
			t.Fatal(err)
		}
		first, _ := libc.LibcMapping(c.Mappings())
		memID, _ := glibc.BuildIDInMemory(c, first.Start)
		c.Close()
		if id := testutil.FileBuildID(t, f); id != memID || len(id) < 3 {
			t.Logf("%s: %s is of build %s, the core's libc of %s", fx.Name, f, id, memID)
			continue
		}
		found++
		t.Run(fx.Name, func(t *testing.T) {
			debug := t.TempDir()
			copyFile(t, f, filepath.Join(debug, ".build-id", memID[:2], memID[2:]))
			h := openCore(t, fx.Core, t.TempDir(), heap.Options{DebugDirs: []string{debug}})
			if h.Libc.Source != glibc.SourceFile || h.Libc.Version.String() != fx.Version || h.TcachesSkipped != "" {
				t.Errorf("libc %s from %q, tcaches skipped %q; notes %q", h.Libc.Version, h.Libc.Source, h.TcachesSkipped, h.LibcNotes)
			}
			if !notesName(h.LibcNotes, first.Path) {
				t.Errorf("notes %q do not say the recorded path %s was missing", h.LibcNotes, first.Path)
			}
		})
	}
	if found == 0 {
		t.Skip("no libc file here of a fixture's build (scripts/fetch-glibc.sh)")
	}
}

func notesName(notes []string, path string) bool {
	for _, n := range notes {
		if strings.Contains(n, path) {
			return true
		}
	}
	return false
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
