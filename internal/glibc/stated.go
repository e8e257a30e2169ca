package glibc

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
)

// statement is a version an object states of itself, and where.
type statement struct {
	v      layouts.Version
	from   string // "libc's banner in memory", "the file name libc-2.31.so"
	banner string
}

// versionedName is libc's file name up to 2.33 (libc.so.6 was a symlink to
// it, which mappings show resolved): libc-2.NN.so.
var versionedName = regexp.MustCompile(`^libc-([0-9]+)\.([0-9]+)\.so$`)

// maxBannerScan bounds how much of an object's read-only memory is
// searched for its banner: libc's code and read-only data are a few MiB.
const maxBannerScan = 8 << 20

// statedVersions are the versions l says it is in the core, most
// trustworthy first: the banner in its read-only memory (a core holds it
// when its dumper kept file pages: gcore, or a coredump_filter with bit
// 2), then its file name. Both are what the object says, where the layout
// inferred from memory is a guess that backports (a distribution's 2.17
// with 2.23's attached_threads) can mislead.
func statedVersions(l *libc.Libc, mem Memory) []statement {
	var out []statement
	scanned := uint64(0)
	for _, m := range l.Mappings {
		if m.Writable() || !m.Readable() || scanned >= maxBannerScan {
			continue
		}
		n := min(m.Size(), maxBannerScan-scanned)
		scanned += n
		if line, v, ok := libc.FindBanner(readPages(mem, m.Start, n)); ok {
			out = append(out, statement{v: v, from: "the banner in its memory", banner: line})
			break
		}
	}
	if m := versionedName.FindStringSubmatch(libc.BaseName(l.Path)); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		out = append(out, statement{v: layouts.Version{Major: major, Minor: minor}, from: "its file name " + libc.BaseName(l.Path)})
	}
	return out
}

// readPages reads n bytes at addr a page at a time; pages memory lacks
// read as zeros.
func readPages(mem Memory, addr, n uint64) []byte {
	b := make([]byte, n)
	for a := uint64(0); a < n; a += pageSz {
		mem.ReadAt(b[a:min(a+pageSz, n)], addr+a)
	}
	return b
}

// believe applies what the object states of its version to r, memory's
// reading: the stated version is the one reported, and its layout is used
// when memory has it; where the two disagree a note says so.
func (e *memEvidence) believe(r *MemoryOnly, says []statement) {
	if len(says) == 0 {
		return
	}
	s, l := says[0], r.Libc
	whose := func(s statement) string {
		return e.objectName() + "'s " + strings.TrimPrefix(strings.TrimPrefix(s.from, "its "), "the ")
	}
	who := whose(s)
	for _, o := range says[1:] {
		if o.v != s.v {
			r.Notes = append(r.Notes, fmt.Sprintf("%s says glibc %s, %s glibc %s: the banner is believed", who, s.v, whose(o), o.v))
		}
	}
	memSays := versionsText(r.fits)
	memLay := r.Layout
	l.Version, l.MinVersion, l.Banner = s.v, layouts.Version{}, s.banner
	switch lay, err := layouts.LayoutFor(s.v); {
	case s.v.Major == 2 && slices.Contains(r.fits, s.v.Minor):
		e.use(r, lay)
		r.SameFormat = true
		l.VersionFrom = fmt.Sprintf("%s; memory agrees (it fits %s): %s", s.from, memSays, strings.Join(e.describe(lay), "; "))
	case err != nil:
		r.SameFormat = false
		l.VersionFrom = fmt.Sprintf("%s; memory fits %s: %s", s.from, memSays, strings.Join(r.Evidence, "; "))
		r.Notes = append(r.Notes, fmt.Sprintf("%s says glibc %s, whose layout arenactl does not know: read with the layout memory fits, that of %s; malloc_info is printed as glibc 2.%d prints it",
			who, s.v, memSays, r.fits[len(r.fits)-1]))
	case e.reads(lay):
		e.use(r, lay)
		r.SameFormat = true
		l.VersionFrom = fmt.Sprintf("%s; memory reads in its layout, though what it shows fits %s: %s", s.from, memSays, strings.Join(r.Evidence, "; "))
		r.Notes = append(r.Notes, fmt.Sprintf("%s says glibc %s, while what memory shows fits %s (%s): read as glibc %s, whose layout memory has",
			who, s.v, memSays, strings.Join(r.Evidence, "; "), s.v))
	default:
		r.SameFormat = r.SameFormat && formatOf(lay) == formatOf(memLay)
		l.VersionFrom = fmt.Sprintf("%s; memory has the layout of %s instead: %s", s.from, memSays, strings.Join(r.Evidence, "; "))
		r.Notes = append(r.Notes, fmt.Sprintf("%s says glibc %s, but memory does not have that version's layout (%s) and has that of %s: read with the latter (a distribution's backports can make it so)",
			who, s.v, e.whyNot(lay), memSays))
	}
}

// reads reports whether memory has lay's layout: main_arena and mp_ are
// found in it and its fields fit, whatever the other votes say.
func (e *memEvidence) reads(lay layouts.Layout) bool {
	st := e.state(lay)
	return st.addr != 0 && st.plausible && e.mp(lay).err == nil
}

// whyNot says why memory does not read in lay's layout.
func (e *memEvidence) whyNot(lay layouts.Layout) string {
	st := e.state(lay)
	switch {
	case st.addr == 0:
		return fmt.Sprintf("no main_arena with its bins at +%#x whose ring closes", lay.StateBins)
	case !st.plausible:
		return fmt.Sprintf("main_arena at %#x has fields after its ring that do not fit", st.addr)
	}
	return e.mp(lay).err.Error()
}

// use makes r read with lay.
func (e *memEvidence) use(r *MemoryOnly, lay layouts.Layout) {
	r.Layout = lay
	r.Anchors.MainArena, r.Anchors.Mp = e.state(lay).addr, e.mp(lay).addr
}

// versionsText names the minor versions of glibc 2 in fits.
func versionsText(fits []int) string {
	lo, hi := fits[0], fits[len(fits)-1]
	if lo == hi {
		return fmt.Sprintf("glibc 2.%d", lo)
	}
	return fmt.Sprintf("glibc 2.%d to 2.%d", lo, hi)
}
