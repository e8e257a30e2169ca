package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// TestSplitDwarfAnswersAsWhole: a module's DWARF opened unit by unit
// (split.go) answers every question as the module's DWARF opened whole:
// the units' ranges, and the file, line, inlined calls and function at
// addresses across the units (each line table row's, and each scope's
// start), on libc's debug files (DWARF 4 and 5, glibc 2.31 to 2.43, those
// this machine has) and on programs built here with DWARF 4 and 5. An LTO
// build refers between units (DW_FORM_ref_addr) and is opened whole.
func TestSplitDwarfAnswersAsWhole(t *testing.T) {
	type module struct {
		name, path string
		split      bool // whether it must be split
	}
	mods := []module{{"dwarf5", testutil.BuildC(t, "leaks_truth.c", "-O2", "-g", "-lstdc++"), true},
		{"dwarf4", testutil.BuildC(t, "leaks_truth.c", "-O2", "-gdwarf-4", "-lstdc++"), true},
		{"lto", testutil.BuildC(t, "leaks_truth.c", "-O2", "-g", "-flto", "-lstdc++"), false}}
	var debugs []string
	for _, pat := range []string{"/usr/lib/debug/.build-id/*/*.debug", filepath.Join(testutil.RepoRoot(t), "testdata/glibc/*/usr/lib/debug/.build-id/*/*.debug")} {
		m, _ := filepath.Glob(pat)
		debugs = append(debugs, m...)
	}
	for _, p := range debugs {
		if st, err := os.Stat(p); err == nil && st.Size() > 1<<20 { // libc's, not ld.so's
			mods = append(mods, module{filepath.Base(p), p, true})
		}
	}
	for _, m := range mods {
		t.Run(m.name, func(t *testing.T) {
			mustSplit := m.split
			f, err := elf.Open(m.path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			whole := newDwarfInfo(d)
			split, err := splitDwarf(f)
			switch {
			case !mustSplit && errors.Is(err, errWhole):
				return
			case err != nil:
				t.Fatalf("split: %v", err)
			case !mustSplit:
				t.Fatal("an LTO build's DWARF was split")
			}
			if len(split.cus) != len(whole.cus) {
				t.Fatalf("%d unit ranges split, %d whole", len(split.cus), len(whole.cus))
			}
			for i, c := range whole.cus {
				if s := split.cus[i]; s.lo != c.lo || s.hi != c.hi {
					t.Fatalf("unit range %d: %+v split, %+v whole", i, s, c)
				}
			}
			// Every unit of a program, 150 of a libc spread over it (a unit
			// is read whole when first asked for: all of libc's take seconds).
			var addrs []uint64
			for i := 0; i < len(whole.cus); i += max(1, len(whole.cus)/150) {
				c := whole.cus[i]
				ci := whole.load(c.off, c.end)
				for _, r := range ci.rows {
					addrs = append(addrs, r.addr)
				}
				for _, s := range ci.scopes {
					addrs = append(addrs, s.lo)
				}
			}
			slices.Sort(addrs)
			addrs = slices.Compact(addrs)
			if len(addrs) < 100 {
				t.Fatalf("%d addresses", len(addrs))
			}
			step := max(1, len(addrs)/5000)
			inlined := 0
			for i := 0; i < len(addrs); i += step {
				a := addrs[i]
				wf, wl := whole.line(a)
				sf, sl := split.line(a)
				wi, si := whole.inlined(a, wf, wl), split.inlined(a, sf, sl)
				if wf != sf || wl != sl || !reflect.DeepEqual(wi, si) || whole.function(a) != split.function(a) {
					t.Fatalf("%#x: split %s:%d %v %q, whole %s:%d %v %q", a, sf, sl, si, split.function(a), wf, wl, wi, whole.function(a))
				}
				if len(wi) > 0 {
					inlined++
				}
			}
			if inlined == 0 {
				t.Errorf("no address in inlined code among %d", len(addrs)/step)
			}
			t.Logf("%d units, %d addresses compared, %d in inlined code", len(whole.cus), len(addrs)/step, inlined)
		})
	}
}

// TestSplitDwarfHeap: opened unit by unit, a libc debug file's DWARF
// costs its sections and an index; opened whole, every unit's
// abbreviations too. Logged, not judged: a heap's size is the runtime's.
func TestSplitDwarfHeap(t *testing.T) {
	m, _ := filepath.Glob("/usr/lib/debug/.build-id/*/*.debug")
	var path string
	for _, p := range m {
		if st, err := os.Stat(p); err == nil && st.Size() > 1<<20 {
			path = p
		}
	}
	if path == "" {
		t.Skip("no libc debug file under /usr/lib/debug")
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h0 := heap()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	h1 := heap()
	runtime.KeepAlive(d)
	d = nil
	h2 := heap()
	di, err := splitDwarf(f)
	if err != nil {
		t.Fatal(err)
	}
	h3 := heap()
	runtime.KeepAlive(di)
	t.Logf("%s: whole %.1f MB, split %.1f MB (%d bytes of DWARF counted)", path, float64(h1-h0)/1e6, float64(h3-h2)/1e6, dwarfBytes(f))
}

// FuzzSplitHeaders: the unit headers and abbreviation tables of a
// hostile file are read without a panic, and every unit span lies within
// .debug_info.
func FuzzSplitHeaders(f *testing.F) {
	f.Add([]byte{7, 0, 0, 0, 4, 0, 0, 0, 0, 0, 8}, []byte{1, 0x11, 1, 0x10, 0x10, 0, 0, 0}, uint64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 11, 0, 0, 0, 0, 0, 0, 0, 5, 0, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0}, []byte{1, 0x11, 0, 3, 0x21, 0x80, 0}, uint64(0))
	f.Fuzz(func(t *testing.T, info, abbrev []byte, off uint64) {
		units, err := unitSpans(info, binary.LittleEndian)
		if err == nil {
			for _, u := range units {
				if u.off >= u.end || u.end > uint64(len(info)) {
					t.Fatalf("a unit %+v outside %d bytes", u, len(info))
				}
			}
		}
		crossUnitForms(abbrev, off)
	})
}
