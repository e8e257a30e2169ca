package mallocinfo

import (
	"bytes"
	"fmt"
	"strconv"
)

// ParseError says where malloc_info XML stopped making sense.
type ParseError struct {
	Line int // 1-based
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("malloc_info XML, line %d: %s", e.Line, e.Msg)
}

// Parse parses what glibc's malloc_info(0, fp) prints, in every
// format from 2.17 to 2.43 (malloc/malloc.c, malloc_info; __malloc_info
// from 2.21): any leading whitespace before <size>/<unsorted>, <unsorted>
// present or not, <total type="mmap"> (from 2.20), <aspace type="subheaps">
// (non-main arenas from 2.27) and <total type="fast"> (absent on 2.43)
// optional.
//
// It is strict otherwise: glibc's output has one fixed shape, so anything
// else (an unknown element or attribute, a value that is not a decimal
// number, a heap out of order, missing </malloc>) means the text is truncated
// or is not malloc_info output, and is reported with its line number.
//
// On glibc 2.17 and 2.18 the <unsorted> values, and the rest totals that
// include them, are uninitialised stack data; they parse like any number.
func Parse(raw []byte) (*Info, error) {
	p := &parser{sc: scanner{data: raw, line: 1}}
	mi, err := p.parse()
	if err != nil {
		return nil, err
	}
	mi.Raw = append([]byte(nil), raw...)
	return mi, nil
}

type parser struct {
	sc scanner
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// next returns the next tag, turning the end of input into an error that
// names what was still open.
func (p *parser) next(inside string) (tag, error) {
	t, ok, err := p.sc.next()
	if err != nil {
		return tag{}, err
	}
	if !ok {
		return tag{}, p.errorf(p.sc.line, "truncated: input ends inside <%s>", inside)
	}
	return t, nil
}

func (p *parser) parse() (*Info, error) {
	t, ok, err := p.sc.next()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, p.errorf(p.sc.line, "empty input: no <malloc> element")
	}
	if t.name != "malloc" || t.kind != tagOpen {
		return nil, p.errorf(t.line, "expected <malloc version=\"1\">, found %s", t)
	}
	vals, err := p.attrs(t, "version")
	if err != nil {
		return nil, err
	}
	if vals[0] != "1" {
		return nil, p.errorf(t.line, "unsupported malloc_info version %q (only \"1\" exists up to glibc 2.43)", vals[0])
	}

	mi := &Info{}
	var st stats
	for {
		t, err := p.next("malloc")
		if err != nil {
			return nil, err
		}
		switch {
		case t.name == "heap" && t.kind == tagOpen:
			if st.seen != 0 {
				return nil, p.errorf(t.line, "<heap> after the global totals")
			}
			a, err := p.heap(t, len(mi.Arenas))
			if err != nil {
				return nil, err
			}
			mi.Arenas = append(mi.Arenas, a)
		case t.kind == tagSelfClosing && isStat(t.name):
			if err := p.stat(t, &st, false); err != nil {
				return nil, err
			}
		case t.name == "malloc" && t.kind == tagClosing:
			if err := p.require(t.line, "</malloc>", st); err != nil {
				return nil, err
			}
			if rest, line := p.sc.rest(); rest != "" {
				return nil, p.errorf(line, "unexpected content after </malloc>: %q", rest)
			}
			mi.HasFast, mi.FastCount, mi.FastBytes = st.has(statFast), st.v[statFast][0], st.v[statFast][1]
			mi.RestCount, mi.RestBytes = st.v[statRest][0], st.v[statRest][1]
			mi.HasMmap, mi.MmapCount, mi.MmapBytes = st.has(statMmap), st.v[statMmap][0], st.v[statMmap][1]
			mi.SystemCurrent, mi.SystemMax = st.v[statSystemCurrent][1], st.v[statSystemMax][1]
			mi.AspaceTotal, mi.AspaceMprotect = st.v[statAspaceTotal][1], st.v[statAspaceMprotect][1]
			return mi, nil
		default:
			return nil, p.errorf(t.line, "unexpected %s inside <malloc>", t)
		}
	}
}

// heap parses one <heap nr="N"> ... </heap>; start is its opening tag.
func (p *parser) heap(start tag, want int) (Arena, error) {
	vals, err := p.attrs(start, "nr")
	if err != nil {
		return Arena{}, err
	}
	nr, err := strconv.Atoi(vals[0])
	if err != nil || nr != want {
		// glibc numbers heaps 0, 1, 2... in ring order; anything else is a
		// spliced or corrupted document.
		return Arena{}, p.errorf(start.line, "<heap nr=%q>: expected nr=\"%d\"", vals[0], want)
	}
	a := Arena{Index: nr}

	t, err := p.next("heap")
	if err != nil {
		return Arena{}, err
	}
	if t.name != "sizes" || t.kind != tagOpen {
		return Arena{}, p.errorf(t.line, "expected <sizes> in heap %d, found %s", nr, t)
	}
	for done := false; !done; {
		t, err := p.next("sizes")
		if err != nil {
			return Arena{}, err
		}
		switch {
		case t.name == "size" && t.kind == tagSelfClosing:
			sc, err := p.sizeClass(t)
			if err != nil {
				return Arena{}, err
			}
			// Fastbins print a bucket [size-15, size]; regular bins print
			// raw size fields, which carry PREV_INUSE and so are odd.
			sc.Fast = sc.To >= 16 && sc.To%16 == 0 && sc.From == sc.To-15
			a.Sizes = append(a.Sizes, sc)
		case t.name == "unsorted" && t.kind == tagSelfClosing:
			if a.Unsorted != nil {
				return Arena{}, p.errorf(t.line, "second <unsorted> in heap %d", nr)
			}
			sc, err := p.sizeClass(t)
			if err != nil {
				return Arena{}, err
			}
			a.Unsorted = &sc
		case t.name == "sizes" && t.kind == tagClosing:
			done = true
		default:
			return Arena{}, p.errorf(t.line, "unexpected %s inside <sizes> of heap %d", t, nr)
		}
	}

	var st stats
	for {
		t, err := p.next("heap")
		if err != nil {
			return Arena{}, err
		}
		switch {
		case t.kind == tagSelfClosing && isStat(t.name):
			if err := p.stat(t, &st, true); err != nil {
				return Arena{}, err
			}
		case t.name == "heap" && t.kind == tagClosing:
			if err := p.require(t.line, fmt.Sprintf("heap %d", nr), st); err != nil {
				return Arena{}, err
			}
			a.HasFast, a.FastCount, a.FastBytes = st.has(statFast), st.v[statFast][0], st.v[statFast][1]
			a.RestCount, a.RestBytes = st.v[statRest][0], st.v[statRest][1]
			a.SystemCurrent, a.SystemMax = st.v[statSystemCurrent][1], st.v[statSystemMax][1]
			a.AspaceTotal, a.AspaceMprotect = st.v[statAspaceTotal][1], st.v[statAspaceMprotect][1]
			a.HasSubheaps, a.Subheaps = st.has(statSubheaps), st.v[statSubheaps][1]
			return a, nil
		default:
			return Arena{}, p.errorf(t.line, "unexpected %s inside heap %d", t, nr)
		}
	}
}

func (p *parser) sizeClass(t tag) (SizeClass, error) {
	vals, err := p.attrs(t, "from", "to", "total", "count")
	if err != nil {
		return SizeClass{}, err
	}
	var n [4]uint64
	for i, name := range [...]string{"from", "to", "total", "count"} {
		if n[i], err = p.number(t, name, vals[i]); err != nil {
			return SizeClass{}, err
		}
	}
	return SizeClass{From: n[0], To: n[1], Total: n[2], Count: n[3]}, nil
}

// The counters that follow </sizes> in a heap and make up the global trailer.
type statKind int

const (
	statFast statKind = iota
	statRest
	statMmap
	statSystemCurrent
	statSystemMax
	statAspaceTotal
	statAspaceMprotect
	statSubheaps
	numStats
)

var statNames = [numStats]string{
	statFast:           `<total type="fast">`,
	statRest:           `<total type="rest">`,
	statMmap:           `<total type="mmap">`,
	statSystemCurrent:  `<system type="current">`,
	statSystemMax:      `<system type="max">`,
	statAspaceTotal:    `<aspace type="total">`,
	statAspaceMprotect: `<aspace type="mprotect">`,
	statSubheaps:       `<aspace type="subheaps">`,
}

// requiredStats are the counters every glibc version prints, per heap and global.
var requiredStats = []statKind{statRest, statSystemCurrent, statSystemMax, statAspaceTotal, statAspaceMprotect}

type stats struct {
	seen uint16
	v    [numStats][2]uint64 // count, size (count is 0 where glibc prints none)
}

func (s *stats) has(k statKind) bool { return s.seen&(1<<k) != 0 }

func isStat(name string) bool { return name == "total" || name == "system" || name == "aspace" }

// stat parses one <total>, <system> or <aspace> line into st. inHeap selects
// which types are allowed: mmap only globally, subheaps only in a heap.
func (p *parser) stat(t tag, st *stats, inHeap bool) error {
	var kind statKind
	var vals []string
	var err error
	switch t.name {
	case "total":
		if vals, err = p.attrs(t, "type", "count", "size"); err != nil {
			return err
		}
		switch vals[0] {
		case "fast":
			kind = statFast
		case "rest":
			kind = statRest
		case "mmap":
			kind = statMmap
		default:
			return p.errorf(t.line, "unknown <total type=%q>", vals[0])
		}
	default: // system, aspace
		if vals, err = p.attrs(t, "type", "size"); err != nil {
			return err
		}
		switch t.name + "/" + vals[0] {
		case "system/current":
			kind = statSystemCurrent
		case "system/max":
			kind = statSystemMax
		case "aspace/total":
			kind = statAspaceTotal
		case "aspace/mprotect":
			kind = statAspaceMprotect
		case "aspace/subheaps":
			kind = statSubheaps
		default:
			return p.errorf(t.line, "unknown <%s type=%q>", t.name, vals[0])
		}
		// Same shape as <total>: a count of 0 and the size.
		vals = []string{vals[0], "0", vals[1]}
	}
	if kind == statMmap && inHeap {
		return p.errorf(t.line, "%s inside a heap (glibc prints it only globally)", statNames[kind])
	}
	if kind == statSubheaps && !inHeap {
		return p.errorf(t.line, "%s outside a heap (glibc prints it only per heap)", statNames[kind])
	}
	if st.has(kind) {
		return p.errorf(t.line, "duplicate %s", statNames[kind])
	}
	count, err := p.number(t, "count", vals[1])
	if err != nil {
		return err
	}
	size, err := p.number(t, "size", vals[2])
	if err != nil {
		return err
	}
	st.seen |= 1 << kind
	st.v[kind] = [2]uint64{count, size}
	return nil
}

func (p *parser) require(line int, where string, st stats) error {
	for _, k := range requiredStats {
		if !st.has(k) {
			return p.errorf(line, "%s lacks %s", where, statNames[k])
		}
	}
	return nil
}

// attrs returns the values of exactly the named attributes of t, in the
// order asked, rejecting missing, unknown and repeated ones.
func (p *parser) attrs(t tag, names ...string) ([]string, error) {
	vals := make([]string, len(names))
	found := make([]bool, len(names))
	for _, a := range t.attrs {
		i := indexOf(names, a.name)
		if i < 0 {
			return nil, p.errorf(t.line, "unknown attribute %q in <%s>", a.name, t.name)
		}
		if found[i] {
			return nil, p.errorf(t.line, "repeated attribute %q in <%s>", a.name, t.name)
		}
		vals[i], found[i] = a.value, true
	}
	for i, ok := range found {
		if !ok {
			return nil, p.errorf(t.line, "<%s> lacks attribute %q", t.name, names[i])
		}
	}
	return vals, nil
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// number parses a %zu/%d value. glibc never prints signs or other bases.
func (p *parser) number(t tag, attr, v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, p.errorf(t.line, "<%s> attribute %s=%q is not a decimal number that fits 64 bits", t.name, attr, v)
	}
	return n, nil
}

// A minimal XML tokenizer for the subset malloc_info prints: elements with
// lower-case names and double-quoted attributes, whitespace between them, no
// text, comments, entities or declarations. It keeps line numbers for errors.

type tagKind int

const (
	tagOpen        tagKind = iota // <name ...>
	tagClosing                    // </name>
	tagSelfClosing                // <name .../>
)

type attr struct{ name, value string }

type tag struct {
	name  string
	kind  tagKind
	attrs []attr
	line  int
}

func (t tag) String() string {
	switch t.kind {
	case tagClosing:
		return "</" + t.name + ">"
	case tagSelfClosing:
		return "<" + t.name + "/>"
	}
	return "<" + t.name + ">"
}

type scanner struct {
	data []byte
	pos  int
	line int
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '\n':
			s.line++
		case ' ', '\t', '\r':
		default:
			return
		}
		s.pos++
	}
}

// rest returns what follows the current position, whitespace skipped,
// shortened for an error message, and the line it starts on.
func (s *scanner) rest() (string, int) {
	s.skipSpace()
	return snippet(s.data[s.pos:]), s.line
}

func snippet(b []byte) string {
	if len(b) > 24 {
		return string(b[:24]) + "..."
	}
	return string(b)
}

func (s *scanner) errorf(line int, format string, args ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// next returns the next tag; ok is false at the end of input.
func (s *scanner) next() (t tag, ok bool, err error) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return tag{}, false, nil
	}
	t.line = s.line
	if s.data[s.pos] != '<' {
		return tag{}, false, s.errorf(s.line, "unexpected text %q (malloc_info prints only elements)", snippet(s.data[s.pos:]))
	}
	s.pos++
	if s.pos < len(s.data) && s.data[s.pos] == '/' {
		t.kind = tagClosing
		s.pos++
	}
	if t.name = s.word(); t.name == "" {
		return tag{}, false, s.errorf(s.line, "expected an element name after '<', found %q", snippet(s.data[s.pos:]))
	}
	for {
		s.skipSpace()
		if s.pos >= len(s.data) {
			return tag{}, false, s.errorf(s.line, "truncated: input ends inside the <%s> tag started on line %d", t.name, t.line)
		}
		switch c := s.data[s.pos]; {
		case c == '>':
			s.pos++
			return t, true, nil
		case c == '/' && t.kind == tagOpen:
			s.pos++
			if s.pos >= len(s.data) || s.data[s.pos] != '>' {
				return tag{}, false, s.errorf(s.line, "expected '>' after '/' in <%s>", t.name)
			}
			s.pos++
			t.kind = tagSelfClosing
			return t, true, nil
		case t.kind == tagClosing:
			return tag{}, false, s.errorf(s.line, "unexpected %q in </%s>", c, t.name)
		default:
			a, err := s.attr(t.name)
			if err != nil {
				return tag{}, false, err
			}
			t.attrs = append(t.attrs, a)
		}
	}
}

// word reads an element or attribute name: malloc_info uses only a-z.
func (s *scanner) word() string {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= 'a' && s.data[s.pos] <= 'z' {
		s.pos++
	}
	return string(s.data[start:s.pos])
}

// attr reads name="value". Values never contain quotes, '<' or newlines.
func (s *scanner) attr(elem string) (attr, error) {
	var a attr
	if a.name = s.word(); a.name == "" {
		return a, s.errorf(s.line, "unexpected %q in <%s>", snippet(s.data[s.pos:]), elem)
	}
	switch {
	case s.pos+2 > len(s.data) && bytes.HasPrefix([]byte(`="`), s.data[s.pos:]):
		return a, s.errorf(s.line, "truncated: input ends inside attribute %q of <%s>", a.name, elem)
	case s.pos+2 > len(s.data) || s.data[s.pos] != '=' || s.data[s.pos+1] != '"':
		return a, s.errorf(s.line, "expected =\"...\" after attribute %q in <%s>", a.name, elem)
	}
	s.pos += 2
	start := s.pos
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '"':
			a.value = string(s.data[start:s.pos])
			s.pos++
			return a, nil
		case '<', '>', '\n':
			return a, s.errorf(s.line, "unterminated value of attribute %q in <%s>", a.name, elem)
		}
		s.pos++
	}
	return a, s.errorf(s.line, "truncated: input ends inside attribute %q of <%s>", a.name, elem)
}
