package libc

import (
	"bytes"
	"debug/elf"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
)

// FindStaticImage treats a static executable as the object that holds the
// allocator: gcc -static links glibc's malloc.c into it, so main_arena, mp_
// and malloc's TLS variables are the executable's own. The result is used
// wherever a shared libc would be, by the read-only walk only: there is no
// libc.so.6 whose functions could be called.
//
// Its Version comes, in this order, from glibc's banner (most static
// programs do not link it), from a version string named in .symtab
// (__libc_version, __nptl_version), or from a lone "2.NN" string in the
// read-only data (threaded programs carry nptl's version for
// libthread_db); the last two are kept only when they agree with the
// fingerprint below. Failing those, it comes from the fingerprint alone:
// the glibc versions whose main_arena and mp_ initialisers are found in
// .data, whose mp_ tcache defaults match, and whose malloc_info format
// strings and malloc error messages are the ones linked in. That narrows
// it to the versions of one layout (2.35 to 2.41, say), which read and
// print alike; Version is then the oldest of them. VersionFrom says which
// way it was found.
func FindStaticImage(ms []maps.Mapping, exePath string, open FileOpener) (*Libc, error) {
	exe := strings.TrimSuffix(exePath, " (deleted)")
	first := -1
	for i, m := range ms {
		if strings.TrimSuffix(m.Path, " (deleted)") == exe && (first < 0 || m.Start < ms[first].Start) {
			first = i
		}
	}
	if first < 0 {
		return nil, fmt.Errorf("the executable %s is not among the process's mappings", exePath)
	}
	return loadObject(ms, ms[first], "executable", open, staticVersion)
}

// staticVersion sets l's Version for a static executable (see
// FindStaticImage).
func staticVersion(ef *elf.File, l *Libc) error {
	ro := readOnlyData(ef)
	fits := fingerprint(l.img, ro)
	fit := func(v layouts.Version) bool {
		for _, m := range fits {
			if v == (layouts.Version{Major: 2, Minor: m}) {
				return true
			}
		}
		return len(fits) == 0 // nothing to check against
	}
	if line, v, err := Banner(ef); err == nil {
		l.Banner, l.Version = line, v
		return nil
	}
	for _, name := range []string{"__libc_version", "__nptl_version", "nptl_version"} {
		if v, ok := symbolVersion(ef, name); ok && fit(v) {
			l.Version, l.VersionFrom = v, "the string "+name+" in the executable"
			return nil
		}
	}
	if v, ok := loneVersionString(ro, fit); ok {
		l.Version, l.VersionFrom = v, fmt.Sprintf("the string %q in the executable's read-only data", v.String())
		return nil
	}
	if len(fits) == 0 {
		return fmt.Errorf("no glibc version string, and the allocator's data and strings match no glibc from 2.17 to 2.43")
	}
	// fits is newest first. Versions of one profile read and print alike,
	// so any of them will do; between profiles (2.30 and 2.31 differ only in
	// malloc_info's output, not in anything linked in), the newest wins.
	newest, lo, others := fits[0], fits[0], 0
	for _, m := range fits {
		if layouts.ProfileName(m) == layouts.ProfileName(newest) {
			lo = m
		} else {
			others++
		}
	}
	l.Version = layouts.Version{Major: 2, Minor: lo}
	l.VersionFrom = fmt.Sprintf("no version string; the allocator's data and strings match glibc 2.%d", lo)
	if lo != newest {
		l.VersionFrom += fmt.Sprintf(" to 2.%d", newest)
	}
	if others > 0 {
		l.VersionFrom += fmt.Sprintf(" (assumed; %d older versions of another layout match too)", others)
	}
	return nil
}

// fingerprint lists, newest first, the minor versions of glibc 2 whose
// allocator could be the one linked into an object with image img and
// read-only data ro (the version profiles of LayoutFor, told apart by
// what the object holds rather than by its version string).
func fingerprint(img image, ro [][]byte) []int {
	has := func(s string) bool {
		for _, b := range ro {
			if bytes.Contains(b, []byte(s)) {
				return true
			}
		}
		return false
	}
	prefix, prefixOK := sizePrefix(ro)
	var (
		fast     = has(`<total type="fast"`)
		mmap     = has(`<total type="mmap"`)
		subheaps = has(`<aspace type="subheaps"`)
		// Messages that malloc_printerr gained: safe-linking's alignment
		// checks in 2.32, the large bin checks in 2.30.
		unaligned = has("unaligned tcache chunk detected")
		largeBk   = has("largebin double linked list corrupted (bk)")
	)
	var fits []int
	for m := 43; m >= 17; m-- {
		lay, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: m})
		if _, err := img.findMainArena(lay); err != nil {
			continue
		}
		mp, err := img.findMp(lay)
		if err != nil {
			continue
		}
		if (prefixOK && prefix != lay.SizePrefix) || fast != lay.FastTotals || mmap != lay.MmapLine ||
			subheaps != lay.AllSubheaps || unaligned != lay.SafeLinking || largeBk != (m >= 30) {
			continue
		}
		// tcache_max_bytes defaults to tidx2usize(63) = 1032 up to 2.41,
		// then to the chunk size 1040, then to 1041 (a bound, not a size).
		if lay.MpTcacheMaxBytes >= 0 {
			want := uint64(1032)
			switch {
			case m == 42:
				want = 1040
			case m >= 43:
				want = 1041
			}
			if !img.is(mp+uint64(lay.MpTcacheMaxBytes), want) {
				continue
			}
		}
		fits = append(fits, m)
	}
	return fits
}

// sizePrefix returns what malloc_info prints before "<size from=": its
// format string, from the previous NUL to that text.
func sizePrefix(ro [][]byte) (string, bool) {
	key := []byte(`<size from="%zu"`)
	for _, b := range ro {
		i := bytes.Index(b, key)
		if i < 0 {
			continue
		}
		start := bytes.LastIndexByte(b[:i], 0) + 1
		return string(b[start:i]), true
	}
	return "", false
}

// symbolVersion reads the "2.NN" string that the named object of ef's
// .symtab holds.
func symbolVersion(ef *elf.File, name string) (layouts.Version, bool) {
	syms, err := ef.Symbols()
	if err != nil {
		return layouts.Version{}, false
	}
	for _, s := range syms {
		if s.Name != name || elf.ST_TYPE(s.Info) != elf.STT_OBJECT || s.Size == 0 || s.Size > 16 ||
			int(s.Section) >= len(ef.Sections) {
			continue
		}
		sec := ef.Sections[s.Section]
		if sec.Type == elf.SHT_NOBITS || s.Value < sec.Addr {
			continue
		}
		b := make([]byte, s.Size)
		if _, err := sec.ReadAt(b, int64(s.Value-sec.Addr)); err != nil {
			continue
		}
		if v, ok := ParseVersion(string(bytes.TrimRight(b, "\x00"))); ok {
			return v, true
		}
	}
	return layouts.Version{}, false
}

var versionString = regexp.MustCompile(`\x002\.([0-9]{2})\x00`)

// loneVersionString finds NUL-terminated "2.NN" strings in ro and returns
// the version when exactly one distinct such string fits.
func loneVersionString(ro [][]byte, fit func(layouts.Version) bool) (layouts.Version, bool) {
	found := map[layouts.Version]bool{}
	for _, b := range ro {
		for _, m := range versionString.FindAllSubmatch(b, -1) {
			if v, ok := ParseVersion("2." + string(m[1])); ok && fit(v) {
				found[v] = true
			}
		}
	}
	if len(found) != 1 {
		return layouts.Version{}, false
	}
	for v := range found {
		return v, true
	}
	return layouts.Version{}, false
}

// ParseVersion parses "2.NN" for a version arenactl knows.
func ParseVersion(s string) (layouts.Version, bool) {
	major, minor, ok := strings.Cut(s, ".")
	if !ok || major != "2" {
		return layouts.Version{}, false
	}
	m, err := strconv.Atoi(minor)
	if err != nil || m < 17 || m > 43 {
		return layouts.Version{}, false
	}
	return layouts.Version{Major: 2, Minor: m}, true
}
