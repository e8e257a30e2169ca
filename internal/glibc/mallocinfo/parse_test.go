package mallocinfo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixtures describes testdata/mallocinfo. Real ones were printed by
// testdata/mi_gen.c under Debian's glibc; the others were written by hand
// from the printf templates of malloc.c at that tag.
var fixtures = []struct {
	version    string
	real       bool
	arenas     int
	fast       bool // prints <total type="fast">
	mmap       bool // prints <total type="mmap"> (>= 2.20)
	subheaps   bool // non-main heaps print <aspace type="subheaps"> (>= 2.27)
	topInRest  bool // rest counts the top chunk (>= 2.31)
	garbageUns bool // <unsorted> is uninitialised stack data (<= 2.18)
}{
	{"2.17", false, 2, true, false, false, false, true},
	{"2.19", false, 2, true, false, false, false, false},
	{"2.23", false, 3, true, true, false, false, false},
	{"2.27", false, 3, true, true, true, false, false},
	{"2.31", true, 4, true, true, true, true, false},
	{"2.36", true, 4, true, true, true, true, false},
	{"2.41", true, 4, true, true, true, true, false},
	{"2.43", true, 4, false, true, true, true, false},
}

func readFixture(t testing.TB, version string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "mallocinfo", version+".xml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseMallocInfoFixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.version, func(t *testing.T) {
			raw := readFixture(t, fx.version)
			mi, err := Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mi.Raw, raw) {
				t.Error("Raw is not the input verbatim")
			}
			if len(mi.Arenas) != fx.arenas {
				t.Fatalf("%d arenas, want %d", len(mi.Arenas), fx.arenas)
			}
			if mi.HasFast != fx.fast || mi.HasMmap != fx.mmap {
				t.Errorf("global HasFast=%v HasMmap=%v, want %v %v", mi.HasFast, mi.HasMmap, fx.fast, fx.mmap)
			}
			if fx.mmap && (mi.MmapCount != 2 || mi.MmapBytes == 0) {
				t.Errorf("mmap count=%d size=%d, want the 2 mmapped chunks", mi.MmapCount, mi.MmapBytes)
			}
			for i, a := range mi.Arenas {
				checkArenaShape(t, fx.version, i, &a, fx.fast, fx.subheaps && i > 0)
				// rest = every regular bin + unsorted (+ top from 2.31).
				if fx.garbageUns && i == 0 {
					continue
				}
				var nfast, fast, n, bytes uint64
				for _, s := range a.Sizes {
					if s.Fast {
						nfast, fast = nfast+s.Count, fast+s.Total
					} else {
						n, bytes = n+s.Count, bytes+s.Total
					}
				}
				if a.Unsorted != nil {
					n, bytes = n+a.Unsorted.Count, bytes+a.Unsorted.Total
				}
				if fx.topInRest {
					n++
				}
				if a.RestCount != n || (!fx.topInRest && a.RestBytes != bytes) || a.RestBytes < bytes {
					t.Errorf("heap %d: rest %d/%d does not add up from its lines (%d/%d)", i, a.RestCount, a.RestBytes, n, bytes)
				}
				if a.FastCount != nfast || a.FastBytes != fast {
					t.Errorf("heap %d: fast %d/%d does not add up from its lines (%d/%d)", i, a.FastCount, a.FastBytes, nfast, fast)
				}
			}
			checkGlobalSums(t, mi)
		})
	}
}

func checkArenaShape(t *testing.T, version string, i int, a *Arena, fast, subheaps bool) {
	t.Helper()
	if a.Index != i {
		t.Errorf("heap %d has Index %d", i, a.Index)
	}
	if a.HasFast != fast {
		t.Errorf("heap %d: HasFast=%v, want %v", i, a.HasFast, fast)
	}
	if a.HasSubheaps != subheaps || (subheaps && a.Subheaps == 0) {
		t.Errorf("heap %d: HasSubheaps=%v Subheaps=%d, want %v", i, a.HasSubheaps, a.Subheaps, subheaps)
	}
	if a.SystemCurrent == 0 || a.SystemMax < a.SystemCurrent {
		t.Errorf("heap %d: system current=%d max=%d", i, a.SystemCurrent, a.SystemMax)
	}
	// glibc prints fastbin buckets first, then the regular bins.
	regular := false
	for _, s := range a.Sizes {
		if !s.Fast {
			regular = true
		} else if regular {
			t.Errorf("heap %d: fastbin bucket %+v after a regular bin", i, s)
		}
		if s.Fast && version == "2.43" {
			t.Errorf("heap %d: fastbin bucket %+v on 2.43, which has no fastbins", i, s)
		}
	}
}

// checkGlobalSums checks that the trailer is the sum of the heaps, as glibc
// computes it (with uint64 wrap-around, which the 2.17 garbage needs).
func checkGlobalSums(t *testing.T, mi *Info) {
	t.Helper()
	var s Info
	for _, a := range mi.Arenas {
		s.FastCount += a.FastCount
		s.FastBytes += a.FastBytes
		s.RestCount += a.RestCount
		s.RestBytes += a.RestBytes
		s.SystemCurrent += a.SystemCurrent
		s.SystemMax += a.SystemMax
		s.AspaceTotal += a.AspaceTotal
		s.AspaceMprotect += a.AspaceMprotect
	}
	got := [...]uint64{mi.FastCount, mi.FastBytes, mi.RestCount, mi.RestBytes, mi.SystemCurrent, mi.SystemMax, mi.AspaceTotal, mi.AspaceMprotect}
	want := [...]uint64{s.FastCount, s.FastBytes, s.RestCount, s.RestBytes, s.SystemCurrent, s.SystemMax, s.AspaceTotal, s.AspaceMprotect}
	if got != want {
		t.Errorf("global fast, rest, system, aspace = %v; sum of heaps = %v", got, want)
	}
}

// TestParseMallocInfo227 checks every number of the hand-written 2.27
// fixture, computed by hand from its lines.
func TestParseMallocInfo227(t *testing.T) {
	raw := readFixture(t, "2.27")
	mi, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := &Info{
		Arenas: []Arena{{
			Index: 0,
			Sizes: []SizeClass{
				{17, 32, 96, 3, true}, {49, 64, 128, 2, true}, {97, 112, 112, 1, true},
				{209, 209, 418, 2, false}, {513, 513, 513, 1, false}, {3009, 3009, 6018, 2, false},
				{9009, 9009, 18018, 2, false}, {40017, 40017, 40017, 1, false},
			},
			Unsorted: &SizeClass{321, 2513, 5876, 4, false},
			HasFast:  true, FastCount: 6, FastBytes: 336,
			RestCount: 12, RestBytes: 70860, // 418+513+6018+18018+40017+5876
			SystemCurrent: 294912, SystemMax: 294912,
			AspaceTotal: 294912, AspaceMprotect: 294912,
		}, {
			Index: 1,
			Sizes: []SizeClass{
				{17, 32, 192, 6, true}, {49, 64, 320, 5, true},
				{209, 209, 1045, 5, false}, {3009, 3009, 15045, 5, false}, {12017, 12017, 24034, 2, false},
			},
			Unsorted: &SizeClass{321, 2513, 6452, 4, false},
			HasFast:  true, FastCount: 11, FastBytes: 512,
			RestCount: 16, RestBytes: 46576,
			SystemCurrent: 184320, SystemMax: 200704,
			AspaceTotal: 184320, AspaceMprotect: 184320,
			Subheaps: 1, HasSubheaps: true,
		}, {
			Index:   2,
			Sizes:   []SizeClass{{1041, 1041, 1041, 1, false}, {65537, 131073, 196610, 2, false}},
			HasFast: true,
			// no unsorted line: the unsorted bin was empty
			RestCount: 3, RestBytes: 197651,
			SystemCurrent: 1187840, SystemMax: 1187840,
			AspaceTotal: 1187840, AspaceMprotect: 1187840,
			Subheaps: 2, HasSubheaps: true,
		}},
		HasFast: true, FastCount: 17, FastBytes: 848,
		RestCount: 31, RestBytes: 315087,
		HasMmap: true, MmapCount: 2, MmapBytes: 1355776,
		SystemCurrent: 1667072, SystemMax: 1683456,
		AspaceTotal: 1667072, AspaceMprotect: 1667072,
		Raw: raw,
	}
	if !reflect.DeepEqual(mi, want) {
		t.Errorf("got  %+v\nwant %+v", mi, want)
	}

	a := &mi.Arenas[2]
	if got := a.LargestFreeClass(); got != 131072 {
		t.Errorf("LargestFreeClass = %d, want 131072 (131073 without PREV_INUSE)", got)
	}
	if got := mi.Arenas[0].LargestFreeClass(); got != 40016 {
		t.Errorf("main arena LargestFreeClass = %d, want 40016", got)
	}
	if got := mi.Arenas[1].FreeBytes(); got != 512+46576 {
		t.Errorf("FreeBytes = %d", got)
	}
	if got := mi.Arenas[1].FreeChunks(); got != 27 {
		t.Errorf("FreeChunks = %d", got)
	}
	if got, want := mi.Arenas[0].FreePercent(), 100*float64(336+70860)/294912; got != want {
		t.Errorf("FreePercent = %v, want %v", got, want)
	}
}

// TestParseMallocInfoReal231 checks the main arena of the real 2.31 output
// against numbers worked out by hand from mi_gen.c.
func TestParseMallocInfoReal231(t *testing.T) {
	mi, err := Parse(readFixture(t, "2.31"))
	if err != nil {
		t.Fatal(err)
	}
	a := mi.Arenas[0]
	// mi_gen frees 10 24-byte chunks (32-byte chunks): 7 fill tcache, 3 are
	// in the fastbin; 9x56 -> 2 of 64; 8x100 -> 1 of 112.
	wantFast := []SizeClass{{17, 32, 96, 3, true}, {49, 64, 128, 2, true}, {97, 112, 112, 1, true}}
	if !reflect.DeepEqual(a.Sizes[:3], wantFast) {
		t.Errorf("fastbins %+v, want %+v", a.Sizes[:3], wantFast)
	}
	if a.FastCount != 6 || a.FastBytes != 96+128+112 {
		t.Errorf("fast %d/%d", a.FastCount, a.FastBytes)
	}
	// 9x200 -> 2 small-bin chunks of 208, raw size 209 (PREV_INUSE).
	if a.Sizes[3] != (SizeClass{209, 209, 418, 2, false}) {
		t.Errorf("small bin 208: %+v", a.Sizes[3])
	}
	// Unsorted: 1500 (1520), 1500 (1520), 2500 (2512), and the 8th 300 (320).
	if *a.Unsorted != (SizeClass{321, 2513, 1521 + 1521 + 2513 + 321, 4, false}) {
		t.Errorf("unsorted %+v", *a.Unsorted)
	}
	// 12 binned chunks plus top, whose size is the rest of the bytes.
	if a.RestCount != 13 {
		t.Errorf("rest count %d, want 13", a.RestCount)
	}
	if top := a.RestBytes - (418 + 513 + 6018 + 18018 + 40017 + 5876); top%16 != 0 || top == 0 || top > a.SystemCurrent {
		t.Errorf("top chunk would be %d bytes", top)
	}
	if mi.MmapCount != 2 || mi.MmapBytes != 1355776 {
		t.Errorf("mmap %d/%d: want the 1 MiB and 300000-byte chunks, page-rounded", mi.MmapCount, mi.MmapBytes)
	}
	if got := a.LargestFreeClass(); got != 40016 {
		t.Errorf("LargestFreeClass = %d, want 40016", got)
	}
}

func TestParseMallocInfo217Garbage(t *testing.T) {
	mi, err := Parse(readFixture(t, "2.17"))
	if err != nil {
		t.Fatal(err)
	}
	u := mi.Arenas[0].Unsorted
	if u == nil || u.Total != 18446603336221196287 || u.Count != 140733193388048 {
		t.Errorf("2.17 garbage unsorted line parsed as %+v", u)
	}
}

func TestParseMallocInfoWhitespace(t *testing.T) {
	// Each glibc's leading whitespace before <size>, and CRLF for good
	// measure, must give the same result.
	body := func(prefix, nl string) []byte {
		return []byte(strings.Join([]string{
			`<malloc version="1">`, `<heap nr="0">`, `<sizes>`,
			prefix + `<size from="17" to="32" total="32" count="1"/>`,
			prefix + `<unsorted from="1041" to="1041" total="1041" count="1"/>`,
			`</sizes>`, `<total type="fast" count="1" size="32"/>`,
			`<total type="rest" count="1" size="1041"/>`,
			`<system type="current" size="135168"/>`, `<system type="max" size="135168"/>`,
			`<aspace type="total" size="135168"/>`, `<aspace type="mprotect" size="135168"/>`,
			`</heap>`, `<total type="fast" count="1" size="32"/>`,
			`<total type="rest" count="1" size="1041"/>`,
			`<system type="current" size="135168"/>`, `<system type="max" size="135168"/>`,
			`<aspace type="total" size="135168"/>`, `<aspace type="mprotect" size="135168"/>`,
			`</malloc>`, ``}, nl))
	}
	var first *Info
	for _, prefix := range []string{"", "\t\t\t\t\t\t\t      ", "\t\t\t\t\t\t\t        ", "  "} {
		for _, nl := range []string{"\n", "\r\n"} {
			mi, err := Parse(body(prefix, nl))
			if err != nil {
				t.Fatalf("prefix %q: %v", prefix, err)
			}
			mi.Raw = nil
			if first == nil {
				first = mi
			} else if !reflect.DeepEqual(mi, first) {
				t.Errorf("prefix %q newline %q: %+v, want %+v", prefix, nl, mi, first)
			}
		}
	}
}

func TestParseMallocInfoErrors(t *testing.T) {
	good := string(readFixture(t, "2.36"))
	lines := strings.Split(good, "\n")
	replace := func(line int, s string) string {
		l := append([]string(nil), lines...)
		l[line-1] = s
		return strings.Join(l, "\n")
	}
	tests := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"empty", "", 1, "empty input"},
		{"not xml", "malloc_info failed\n", 1, "unexpected text"},
		{"truncated mid-heap", good[:strings.Index(good, "<heap nr=\"1\">")+40], 23, "truncated: input ends inside the <size> tag"},
		{"truncated mid-tag", good[:strings.Index(good, "<total type=\"rest\"")+12], 15, "truncated"},
		{"truncated mid-value", good[:strings.Index(good, "count=\"13\"")+8], 15, "truncated"},
		{"no </malloc>", strings.TrimSuffix(good, "</malloc>\n"), 88, "truncated: input ends inside <malloc>"},
		{"non-numeric", strings.Replace(good, `total="96"`, `total="9x6"`, 1), 4, `total="9x6" is not a decimal number`},
		{"negative", strings.Replace(good, `total="96"`, `total="-96"`, 1), 4, "is not a decimal number"},
		{"overflow", strings.Replace(good, `total="96"`, `total="18446744073709551616"`, 1), 4, "fits 64 bits"},
		{"unknown element", replace(14, `<total type="fast" count="6" size="336"/><frob/>`), 14, "unexpected <frob/> inside heap 0"},
		{"unknown total", replace(14, `<total type="slow" count="6" size="336"/>`), 14, `unknown <total type="slow">`},
		{"unknown attribute", replace(4, `  <size from="17" to="32" total="96" count="3" x="1"/>`), 4, `unknown attribute "x"`},
		{"missing attribute", replace(4, `  <size from="17" to="32" total="96"/>`), 4, `lacks attribute "count"`},
		{"repeated attribute", replace(4, `  <size from="17" from="17" to="32" total="96" count="3"/>`), 4, `repeated attribute "from"`},
		{"duplicate total", replace(14, `<total type="rest" count="6" size="336"/>`), 15, `duplicate <total type="rest">`},
		{"missing system", replace(16, ``), 20, `heap 0 lacks <system type="current">`},
		{"heap out of order", replace(21, `<heap nr="2">`), 21, `expected nr="1"`},
		{"version", replace(1, `<malloc version="2">`), 1, "unsupported malloc_info version"},
		{"trailing", good + "<malloc>", 89, "unexpected content after </malloc>"},
		{"text", replace(3, `<sizes>hello`), 3, `unexpected text "hello`},
		{"unterminated value", replace(4, `  <size from="17/>`), 4, `unterminated value of attribute "from"`},
		{"unquoted value", replace(4, `  <size from=17 to="32" total="96" count="3"/>`), 4, `expected ="..." after attribute "from"`},
		{"mmap in heap", replace(14, `<total type="mmap" count="6" size="336"/>`), 14, "only globally"},
		{"subheaps global", replace(88, `<aspace type="subheaps" size="1"/>`), 88, "only per heap"},
		{"second unsorted", replace(11, `  <unsorted from="1" to="1" total="1" count="1"/>`), 12, "second <unsorted>"},
		{"heap after trailer", strings.Replace(good, "</malloc>", `<heap nr="4">`, 1), 88, "<heap> after the global totals"},
		{"bad close", replace(19, `</heap x>`), 19, "in </heap>"},
		{"no name", replace(19, `< heap>`), 19, "expected an element name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mi, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("parsed: %+v", mi)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			if pe.Line != tt.line || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("error %q, want line %d and %q", err, tt.line, tt.msg)
			}
		})
	}
}

func TestArenaEmpty(t *testing.T) {
	var a Arena
	if a.FreePercent() != 0 || a.LargestFreeClass() != 0 || a.FreeBytes() != 0 {
		t.Errorf("empty arena: %v %v %v", a.FreePercent(), a.LargestFreeClass(), a.FreeBytes())
	}
}

func FuzzParseMallocInfo(f *testing.F) {
	for _, fx := range fixtures {
		f.Add(readFixture(f, fx.version))
	}
	f.Add([]byte(`<malloc version="1"><heap nr="0"><sizes></sizes></heap></malloc>`))
	f.Add([]byte("<malloc version=\"1\">\n<total type=\"rest\" count=\"1\" size=\"2\"/>\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		mi, err := Parse(raw)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error %v is not a *ParseError with a line", err)
			}
			return
		}
		if !bytes.Equal(mi.Raw, raw) {
			t.Fatal("Raw differs from input")
		}
		for i, a := range mi.Arenas {
			if a.Index != i {
				t.Fatalf("heap %d has Index %d", i, a.Index)
			}
			_, _ = a.FreePercent(), a.LargestFreeClass()
		}
	})
}
