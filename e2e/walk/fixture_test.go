package walk

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/testutil"
)

// Every committed fixture gives glibc's own XML back byte for byte.
// Snapshots need no libc file at all (their note says everything): an empty
// sysroot and debug directory, and --no-libc-file. Kernel cores do with the
// libc they ran (when this machine has it: the build-id must match) and
// without any (memory alone, forced by --no-libc-file or by an empty
// sysroot). The version libc states (its file name libc-2.31.so) is
// believed where memory agrees. Where memory alone fits glibc versions that
// print differently and nothing states which, exact is false and what is checked
// is what it can promise: the arenas' system, fast and rest totals, and a
// range that holds the true version; the XML must still be glibc's when the
// newest of the range is the true version.
func TestCoreFixtures(t *testing.T) {
	empty := t.TempDir()
	noFiles := []string{"--sysroot", empty, "--debug-dir", empty}
	for _, fx := range testutil.CoreFixtures(t) {
		t.Run(fx.Name, func(t *testing.T) {
			if fx.Kind == "snapshot" {
				args := append(append([]string{}, noFiles...), "--no-libc-file", fx.Core)
				if got := mustRun(t, append([]string{"info", "--xml"}, args...)...).Stdout; got != string(fx.XML) {
					t.Fatalf("the snapshot differs from glibc's malloc_info\n--- glibc\n%s\n--- snapshot\n%s", fx.XML, got)
				}
				rep := infoJSONOf(t, args...)
				if rep.Libc.Source != glibc.SourceRecord || rep.Libc.Version != fx.Version || rep.Libc.VersionMin != "" || !rep.ReadOnly.Exact {
					t.Errorf("glibc %+v, exact %v", rep.Libc, rep.ReadOnly.Exact)
				}
				// A snapshot keeps the header page of every chunk glibc
				// mmapped, wherever the kernel merged its mapping (the
				// 2.43 fixture, made before that, had 2 of 4).
				if mm := rep.ReadOnly.Mmapped; rep.Totals.MmapCount == nil || mm.Count != *rep.Totals.MmapCount || mm.Bytes != *rep.Totals.MmapBytes {
					t.Errorf("mmapped chunks found %+v, malloc counts %v", mm, rep.Totals)
				}
				// The note's TLS slots find every thread's tcache and arena.
				if len(rep.ReadOnly.Threads) != 3 || rep.ReadOnly.TcachesSkipped != "" {
					t.Fatalf("threads %+v (%s)", rep.ReadOnly.Threads, rep.ReadOnly.TcachesSkipped)
				}
				for _, th := range rep.ReadOnly.Threads {
					if th.Tcache == 0 || th.Arena == nil || th.TcacheChunks == 0 {
						t.Errorf("thread %+v", th)
					}
				}
				return
			}
			memArgs := [][]string{{"--no-libc-file", fx.Core}, append(append([]string{}, noFiles...), fx.Core)}
			mem := infoJSONOf(t, memArgs[0]...)
			if libc := testutil.LibcFileFor(t, fx.Version); libc == "" {
				t.Logf("no glibc %s here (scripts/fetch-glibc.sh): the core is read from memory only", fx.Version)
			} else {
				args := []string{"--libc", libc, "--debug-dir", empty, fx.Core}
				rep := infoJSONOf(t, args...)
				if testutil.FileBuildID(t, libc) != mem.Libc.BuildID {
					// The system's libc, updated since the fixture was made:
					// another build is refused, and memory alone is read.
					if rep.Libc.Source != glibc.SourceMemory || !strings.Contains(strings.Join(rep.Core.LibcNotes, "\n"), "another build") {
						t.Errorf("libc %s of build %s for a core of build %s: %+v, notes %q", libc, rep.Libc.BuildID, mem.Libc.BuildID, rep.Libc, rep.Core.LibcNotes)
					}
				} else {
					if got := mustRun(t, append([]string{"info", "--xml"}, args...)...).Stdout; got != string(fx.XML) {
						t.Fatalf("the core read with %s differs from glibc's malloc_info\n--- glibc\n%s\n--- core\n%s", libc, fx.XML, got)
					}
					if rep.Libc.Source != glibc.SourceFile || rep.Libc.Version != fx.Version || len(rep.ReadOnly.Threads) != 3 {
						t.Errorf("glibc %+v, %d threads", rep.Libc, len(rep.ReadOnly.Threads))
					}
				}
				// A libc of another version at the recorded path's place is
				// refused, however it is given.
				for _, g := range testutil.GlibcTrees(t) {
					if other := testutil.LibcFileFor(t, g.Version); g.Version != fx.Version && other != "" {
						rep := infoJSONOf(t, "--libc", other, "--sysroot", empty, "--debug-dir", empty, fx.Core)
						if rep.Libc.Source != glibc.SourceMemory || !strings.Contains(strings.Join(rep.Core.LibcNotes, "\n"), "another build") {
							t.Errorf("--libc of glibc %s for a %s core: %+v, notes %q", g.Version, fx.Version, rep.Libc, rep.Core.LibcNotes)
						}
						break
					}
				}
			}
			for _, args := range memArgs {
				rep := infoJSONOf(t, args...)
				if rep.Libc.Source != glibc.SourceMemory || rep.ReadOnly.TcachesSkipped == "" || len(rep.ReadOnly.Threads) != 0 || rep.Libc.BuildID == "" {
					t.Errorf("%v: glibc %+v, threads %v, tcaches %q", args, rep.Libc, rep.ReadOnly.Threads, rep.ReadOnly.TcachesSkipped)
				}
				if !inRange(fx.Version, rep.Libc.VersionMin, rep.Libc.Version) {
					t.Errorf("%v: glibc %s to %s, the core's is %s", args, rep.Libc.VersionMin, rep.Libc.Version, fx.Version)
				}
				got := mustRun(t, append([]string{"info", "--xml"}, args...)...).Stdout
				if rep.ReadOnly.Exact || rep.Libc.Version == fx.Version {
					if got != string(fx.XML) {
						t.Fatalf("%v: memory alone differs from glibc's malloc_info\n--- glibc\n%s\n--- core\n%s", args, fx.XML, got)
					}
				} else {
					sameTotals(t, fx.XML, []byte(got))
				}
			}
			// Memory alone cannot tell 2.30 from 2.31, which print
			// differently; libc's file name (libc-2.31.so) says which.
			if fx.Version == "2.31" && (!mem.ReadOnly.Exact || mem.Libc.Version != "2.31" || mem.Libc.VersionMin != "" ||
				!strings.HasPrefix(mem.Libc.VersionFrom, "its file name libc-2.31.so; memory agrees (it fits glibc 2.30 to 2.31)")) {
				t.Errorf("the 2.31 core from memory: glibc %+v, exact %v", mem.Libc, mem.ReadOnly.Exact)
			}
		})
	}
}

// inRange reports whether glibc v is within lo (empty: hi itself) and hi.
func inRange(v, lo, hi string) bool {
	pv, ok1 := glibcVersion(v)
	ph, ok2 := glibcVersion(hi)
	pl, ok3 := glibcVersion(lo)
	if lo == "" {
		pl, ok3 = ph, ok2
	}
	return ok1 && ok2 && ok3 && !pv.Less(pl.Major, pl.Minor) && !ph.Less(pv.Major, pv.Minor)
}

func glibcVersion(s string) (layouts.Version, bool) {
	var v layouts.Version
	n, _ := fmt.Sscanf(s, "%d.%d", &v.Major, &v.Minor)
	return v, n == 2
}

// sameTotals checks two malloc_info reports agree on every arena's system,
// fast and rest totals and on the trailer's.
func sameTotals(t *testing.T, want, got []byte) {
	t.Helper()
	w, err1 := mallocinfo.Parse(want)
	g, err2 := mallocinfo.Parse(got)
	if err1 != nil || err2 != nil {
		t.Fatalf("%v, %v", err1, err2)
	}
	if len(w.Arenas) != len(g.Arenas) {
		t.Fatalf("%d arenas, glibc printed %d", len(g.Arenas), len(w.Arenas))
	}
	for i := range w.Arenas {
		a, b := w.Arenas[i], g.Arenas[i]
		if a.SystemCurrent != b.SystemCurrent || a.SystemMax != b.SystemMax || a.FastCount != b.FastCount || a.FastBytes != b.FastBytes ||
			a.RestCount != b.RestCount || a.RestBytes != b.RestBytes {
			t.Errorf("arena %d: %+v, glibc printed %+v", i, b, a)
		}
	}
	if w.SystemCurrent != g.SystemCurrent || w.RestBytes != g.RestBytes || w.FastBytes != g.FastBytes || w.MmapBytes != g.MmapBytes {
		t.Errorf("totals differ:\n%s\n%s", got, want)
	}
}

// The README's first command: a snapshot read with nothing but arenactl
// (no libc file, no glibc tree, no debug files).
func TestCoreFixtureReadme(t *testing.T) {
	snap := filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-2.36-snapshot.core.zst")
	r := mustRun(t, "info", "--debug-dir", t.TempDir(), snap)
	for _, w := range []string{"glibc 2.36", "libc: snapshot note", "3 arenas", "from the chunk walk", "tcaches:"} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.Stdout)
		}
	}
}

// Files that are not usable cores, made from a fixture: one clear line on
// stderr each, exit 12, never a panic.
func TestCoreFixtureDamaged(t *testing.T) {
	zst, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-2.36-kernel.core.zst"))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := zstd.NewReader(nil)
	raw, err := d.DecodeAll(zst, nil)
	if err != nil {
		t.Fatal(err)
	}
	arm := append([]byte(nil), raw[:1<<16]...)
	arm[18], arm[19] = 243, 0 // EM_RISCV
	exe, _ := os.ReadFile(arenactl)
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"random", bytes.Repeat([]byte{0x11, 0xa7, 0x3c, 0x5e}, 4096), "not an ELF file"},
		{"executable", exe[:1<<16], "not a core file"},
		{"other-arch", arm, "another architecture"},
		{"truncated", raw[:len(raw)/3], "truncated"},
		{"header-cut", raw[:30], "truncated"},
		{"zstd-cut", zst[:len(zst)/2], "zstd"},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, "info", p)
		if r.Code != exitBadCore || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, c.want) || !strings.Contains(r.Stderr, p) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d naming the file and %q", c.name, r.Code, r.Stderr, exitBadCore, c.want)
		}
	}
}
