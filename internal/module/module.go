// Package module owns the view of a target's code as loaded ELF objects: which
// file is mapped where, at what load bias, with which build-id, and the
// opened file itself. The unwinder (internal/unwind) and the symbolizer
// (internal/symbolize) both look addresses up here, so each object is
// opened and its headers parsed once however many samples name it. Its
// reader of ELF notes and build-ids is the only one: internal/glibc
// identifies libc's file, and a core's libc in memory, with it too.
package module

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
)

// Module is one ELF object mapped into the target. Its file is opened on
// first use and shared by every lookup.
type Module struct {
	Path  string // as the target mapped it
	Start uint64 // lowest address of its mappings
	End   uint64 // end of its highest mapping
	// Bias is what is added to the file's virtual addresses to get the
	// target's: 0 for a non-PIE executable, the load base for a PIE or a
	// shared library.
	Bias uint64

	key     fileKey
	mapping maps.Mapping // one of its mappings, to open the file through
	tg      debuggee.Target

	once    sync.Once
	file    io.ReaderAt // the opened file, or the vDSO's image read from memory
	closer  io.Closer
	elf     *elf.File
	buildID string
	err     error

	debugDirs []string
	fetched   string // a debug file fetched by build-id (Table.FetchDebug)
	debugOnce sync.Once
	debugFile *os.File
	debugELF  *elf.File
	debugPath string
}

// fileKey tells one mapped file from another across refreshes: the same
// library mapped again after a dlopen/dlclose at another base is another
// Module, the same one seen again is not.
type fileKey struct {
	dev   string
	inode uint64
	path  string
	start uint64
}

// ELF opens (once) and parses the module's file through the target, so
// that files in another mount namespace are reached (/proc/PID/map_files).
func (m *Module) ELF() (*elf.File, error) {
	m.once.Do(m.open)
	return m.elf, m.err
}

// BuildID is the module's GNU build-id as hex, "" when it has none or its
// file cannot be read.
func (m *Module) BuildID() string {
	m.once.Do(m.open)
	return m.buildID
}

func (m *Module) open() {
	if m.Path == VDSO {
		// The kernel's vDSO is no file: its image is read from the
		// target's memory (a core holds it too).
		img := make([]byte, m.mapping.Size())
		if _, err := m.tg.ReadAt(img, m.mapping.Start); err != nil {
			m.err = fmt.Errorf("module %s: %w", m.Path, err)
			return
		}
		m.file = bytes.NewReader(img)
	} else {
		f, err := m.tg.OpenFile(m.mapping)
		if err != nil {
			m.err = fmt.Errorf("module %s: %w", m.Path, err)
			return
		}
		m.file, m.closer = f, f
	}
	ef, err := elf.NewFile(m.file)
	if err != nil {
		if m.closer != nil {
			m.closer.Close()
		}
		m.file, m.closer = nil, nil
		m.err = fmt.Errorf("module %s: %w", m.Path, err)
		return
	}
	m.elf = ef
	m.buildID = BuildIDOf(ef)
}

// VDSO is the name the kernel gives the vDSO's mapping.
const VDSO = "[vdso]"

// ReadVaddr reads the module's file contents at a file virtual address
// (before the bias), as loaded: for code, what the target executes unless it
// was patched.
func (m *Module) ReadVaddr(p []byte, vaddr uint64) error {
	ef, err := m.ELF()
	if err != nil {
		return err
	}
	for _, ph := range ef.Progs {
		if ph.Type != elf.PT_LOAD || vaddr < ph.Vaddr || vaddr+uint64(len(p)) > ph.Vaddr+ph.Filesz {
			continue
		}
		_, err := m.file.ReadAt(p, int64(ph.Off+vaddr-ph.Vaddr))
		return err
	}
	return fmt.Errorf("module %s: %#x is not in a loaded segment", m.Path, vaddr)
}

func (m *Module) close() {
	if m.closer != nil {
		m.closer.Close()
	}
	if m.debugFile != nil {
		m.debugFile.Close()
	}
}

// DefaultDebugDir is where distributions install separate debug files
// (Debian's -dbg/-dbgsym packages), searched as gdb and addr2line do.
const DefaultDebugDir = "/usr/lib/debug"

// Debug finds the module's DWARF (once): its own file when it carries
// .debug_info, else a separate debug file by build-id
// (DIR/.build-id/xx/rest.debug) or by .gnu_debuglink, under
// /usr/lib/debug and the table's extra directories, as gdb and addr2line
// look. The path is "" and the file nil when there is none: debug info is
// used when present, never required. Separate debug files are host files
// (as for gdb), not the target's.
func (m *Module) Debug() (*elf.File, string) {
	m.debugOnce.Do(m.findDebug)
	return m.debugELF, m.debugPath
}

func (m *Module) findDebug() {
	ef, err := m.ELF()
	if err != nil {
		return
	}
	if hasDWARF(ef) {
		m.debugELF, m.debugPath = ef, m.Path
		return
	}
	for _, c := range m.debugCandidates(ef) {
		if f, def := openDebug(c, m.buildID); f != nil {
			m.debugFile, m.debugELF, m.debugPath = f, def, c
			return
		}
	}
}

func hasDWARF(ef *elf.File) bool {
	s := ef.Section(".debug_info")
	return s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0
}

// openDebug opens a separate debug file that has DWARF and, when both
// have one, the module's build-id.
func openDebug(path, buildID string) (*os.File, *elf.File) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil
	}
	def, err := elf.NewFile(f)
	if err != nil || def.Section(".debug_info") == nil ||
		(buildID != "" && BuildIDOf(def) != "" && BuildIDOf(def) != buildID) {
		f.Close()
		return nil, nil
	}
	return f, def
}

// debugCandidates are the paths where the module's separate debug file may
// be, in gdb's order, then the one fetched by build-id.
func (m *Module) debugCandidates(ef *elf.File) []string {
	dirs := append([]string{DefaultDebugDir}, m.debugDirs...)
	var candidates []string
	if id := m.buildID; len(id) > 2 {
		for _, d := range dirs {
			candidates = append(candidates,
				filepath.Join(d, ".build-id", id[:2], id[2:]+".debug"),
				filepath.Join(d, id[:2], id[2:]+".debug"))
		}
	}
	if link := debugLink(ef); link != "" && filepath.IsAbs(m.Path) {
		dir := filepath.Dir(m.Path)
		candidates = append(candidates, filepath.Join(dir, ".debug", link))
		for _, d := range dirs {
			candidates = append(candidates, filepath.Join(d, dir, link), filepath.Join(d, link))
		}
	}
	if m.fetched != "" {
		candidates = append(candidates, m.fetched)
	}
	return candidates
}

// hasLocalDebug tells whether the module's DWARF is here: in its file or a
// separate debug file where gdb would look. It keeps nothing, so that Debug
// may still use a file fetched after it.
func (m *Module) hasLocalDebug() bool {
	ef, err := m.ELF()
	if err != nil {
		return true // nothing to fetch for: no build-id can be read
	}
	if hasDWARF(ef) {
		return true
	}
	for _, c := range m.debugCandidates(ef) {
		if f, _ := openDebug(c, m.buildID); f != nil {
			f.Close()
			return true
		}
	}
	return false
}

// FetchDebug asks fetch (a debuginfod client's Fetch) for the debug file of
// every module that has a build-id and no DWARF here, and has Debug use
// what it got. Call it before anything asks a module for its Debug (the
// answer is kept) and while nothing of the target is held: a fetch takes
// as long as the network does. It returns how many modules lacked a debug
// file, how many were fetched, and the failures other than a server not
// having one (notFound tells those).
func (t *Table) FetchDebug(ctx context.Context, fetch func(context.Context, string) (string, error), notFound func(error) bool) (wanted, fetched int, errs []error) {
	var mods []*Module
	for _, m := range t.mods {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Start < mods[j].Start })
	tried := map[string]string{}
	for _, m := range mods {
		if m.Path == VDSO || m.BuildID() == "" || m.hasLocalDebug() {
			continue
		}
		wanted++
		path, done := tried[m.buildID]
		if !done {
			var err error
			path, err = fetch(ctx, m.buildID)
			if err != nil {
				if ctx.Err() != nil {
					return wanted, fetched, append(errs, ctx.Err())
				}
				if !notFound(err) {
					errs = append(errs, fmt.Errorf("%s: %w", m.Path, err))
				}
			}
			tried[m.buildID] = path
		}
		if path != "" {
			m.fetched = path
			fetched++
		}
	}
	return wanted, fetched, errs
}

// debugLink is the file name in a .gnu_debuglink section.
func debugLink(ef *elf.File) string {
	s := ef.Section(".gnu_debuglink")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil {
		return ""
	}
	if i := bytes.IndexByte(b, 0); i > 0 {
		return filepath.Base(string(b[:i]))
	}
	return ""
}

// BuildIDOf returns the hex NT_GNU_BUILD_ID of ef, or "" when it has none:
// from its note sections (.note.gnu.build-id), or, in a file without
// section headers, its PT_NOTE segments.
func BuildIDOf(ef *elf.File) string {
	var notes [][]byte
	for _, s := range ef.Sections {
		if s.Type == elf.SHT_NOTE {
			if b, err := s.Data(); err == nil {
				notes = append(notes, b)
			}
		}
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_NOTE {
			if b, err := io.ReadAll(io.LimitReader(p.Open(), 1<<16)); err == nil {
				notes = append(notes, b)
			}
		}
	}
	for _, b := range notes {
		if id := FindNote(b, ef.ByteOrder, "GNU", 3); id != nil { // NT_GNU_BUILD_ID
			return hex.EncodeToString(id)
		}
	}
	return ""
}

// FindNote walks ELF notes (namesz, descsz, type, then name and desc, each
// padded to 4 bytes) and returns the descriptor of the first note with the
// given name and type. It is the one reader of note records, for a file's
// notes and for those a core's memory holds (glibc.BuildIDInMemory).
func FindNote(b []byte, bo binary.ByteOrder, name string, typ uint32) []byte {
	pad := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for len(b) >= 12 {
		namesz, descsz, t := uint64(bo.Uint32(b)), uint64(bo.Uint32(b[4:])), bo.Uint32(b[8:])
		b = b[12:]
		if pad(namesz) > uint64(len(b)) {
			return nil
		}
		n := bytes.TrimRight(b[:namesz], "\x00")
		b = b[pad(namesz):]
		if descsz > uint64(len(b)) {
			return nil
		}
		if t == typ && string(n) == name {
			return b[:descsz]
		}
		if pad(descsz) >= uint64(len(b)) {
			return nil
		}
		b = b[pad(descsz):]
	}
	return nil
}

// Table is a target's modules by address. Not safe for concurrent use
// with Refresh; lookups alone may run concurrently.
type Table struct {
	tg        debuggee.Target
	debugDirs []string
	ranges    []span // executable mappings, sorted by start
	mods      map[fileKey]*Module
}

type span struct {
	start, end uint64
	mod        *Module
}

// ErrNoModule: the address is not in an executable file mapping.
var ErrNoModule = errors.New("address is not in a mapped executable file")

// NewTable reads the target's mappings into modules. Each file is opened
// once, when its module is first seen (its headers give the load bias).
// debugDirs are searched for separate debug files after /usr/lib/debug.
func NewTable(tg debuggee.Target, debugDirs ...string) *Table {
	t := &Table{tg: tg, debugDirs: debugDirs, mods: map[fileKey]*Module{}}
	t.Refresh()
	return t
}

// Refresh re-reads the target's mappings (after the caller refreshed the
// target: a library dlopen'd meanwhile), keeping what was already parsed
// of the modules still mapped at the same place.
func (t *Table) Refresh() {
	ms := t.tg.Mappings()
	// A module's first mapping (file offset 0) fixes its identity and
	// start; its executable mappings are what addresses are looked up in.
	byFile := map[string]maps.Mapping{} // path+dev+inode -> first mapping seen at offset 0
	var ranges []span
	seen := map[fileKey]bool{}
	for _, m := range ms {
		// Named file mappings (a core's have no inode), and the vDSO;
		// not [heap], [stack], [anon: ...].
		if m.Path == "" || (m.Path[0] == '[' && m.Path != VDSO) {
			continue
		}
		id := fmt.Sprintf("%s\x00%d\x00%s", m.Dev, m.Inode, m.Path)
		if m.Offset == 0 {
			byFile[id] = m
		}
		if !m.Executable() {
			continue
		}
		first, ok := byFile[id]
		if !ok {
			first = m // mapped without its headers: bias from this mapping alone
		}
		key := fileKey{dev: m.Dev, inode: m.Inode, path: m.Path, start: first.Start}
		mod := t.mods[key]
		if mod == nil {
			mod = &Module{Path: m.Path, Start: first.Start, key: key, mapping: m, tg: t.tg, debugDirs: t.debugDirs}
			mod.Bias = biasFor(mod, m)
			t.mods[key] = mod
		}
		if m.End > mod.End {
			mod.End = m.End
		}
		seen[key] = true
		ranges = append(ranges, span{m.Start, m.End, mod})
	}
	// A file mapped with no executable mapping in sight is still a module
	// for what is read of its data (vtables): a core gdb's gcore wrote
	// lists no text a file holds unchanged.
	for _, first := range byFile {
		key := fileKey{dev: first.Dev, inode: first.Inode, path: first.Path, start: first.Start}
		if seen[key] {
			continue
		}
		mod := t.mods[key]
		if mod == nil {
			mod = &Module{Path: first.Path, Start: first.Start, End: first.End, key: key, mapping: first, tg: t.tg, debugDirs: t.debugDirs}
			mod.Bias = biasFor(mod, first)
			t.mods[key] = mod
		}
		seen[key] = true
	}
	for k, mod := range t.mods {
		if !seen[k] {
			mod.close()
			delete(t.mods, k)
		}
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].start < ranges[j].start })
	t.ranges = ranges
}

// biasFor computes the load bias from the executable mapping and the
// PT_LOAD segment holding its file offset: the mapping shows where that
// offset landed, the segment where the linker meant it to be.
func biasFor(mod *Module, m maps.Mapping) uint64 {
	ef, err := mod.ELF()
	if err != nil {
		return m.Start - m.Offset // the usual layout, for want of headers
	}
	if bias, ok := LoadBias(ef, m); ok {
		return bias
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			return m.Start - m.Offset - (p.Vaddr - p.Off)
		}
	}
	return m.Start - m.Offset
}

// LoadBias is the load bias of the ELF file mapped at m (a segment's
// address in the process less its p_vaddr), from the PT_LOAD segment m
// maps: the one whose file pages m starts in. The loader maps a segment
// from its file offset rounded down to a page (elf/dl-map-segments.h,
// _dl_map_segments), so a mapping starts on its segment's first page, or
// inside it where mprotect split it later (RELRO); where two segments
// share a page, the mapping that starts there is the later one's.
func LoadBias(ef *elf.File, m maps.Mapping) (uint64, bool) {
	var seg *elf.Prog
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		first := p.Off &^ 0xfff
		if first <= m.Offset && (m.Offset < p.Off+p.Filesz || m.Offset == first) && (seg == nil || first >= seg.Off&^0xfff) {
			seg = p
		}
	}
	if seg == nil {
		return 0, false
	}
	return m.Start - m.Offset + seg.Off - seg.Vaddr, true
}

// Lookup finds the module whose executable mapping holds addr.
func (t *Table) Lookup(addr uint64) (*Module, bool) {
	r := t.ranges
	i := sort.Search(len(r), func(i int) bool { return r[i].end > addr })
	if i < len(r) && r[i].start <= addr {
		return r[i].mod, true
	}
	return nil, false
}

// DynamicSymbol is the run-time address of the dynamic symbol name in the
// first module whose path contains path.
func (t *Table) DynamicSymbol(path, name string) (uint64, error) {
	for _, m := range t.Modules() {
		if !strings.Contains(m.Path, path) {
			continue
		}
		ef, err := m.ELF()
		if err != nil {
			return 0, err
		}
		syms, err := ef.DynamicSymbols()
		if err != nil {
			return 0, fmt.Errorf("module %s: %w", m.Path, err)
		}
		for _, s := range syms {
			if s.Name == name && s.Value != 0 {
				return s.Value + m.Bias, nil
			}
		}
		return 0, fmt.Errorf("module %s: no dynamic symbol %s", m.Path, name)
	}
	return 0, fmt.Errorf("no module named like %s", path)
}

// Arch is the target's machine (nil where the target does not say: a
// test's stand-in, read as x86_64).
func (t *Table) Arch() *arch.Arch { return t.tg.Arch() }

// Modules lists the modules with executable mappings, in address order:
// the code a stack or a symbol can be in.
func (t *Table) Modules() []*Module {
	var out []*Module
	seen := map[*Module]bool{}
	for _, r := range t.ranges {
		if !seen[r.mod] {
			seen[r.mod] = true
			out = append(out, r.mod)
		}
	}
	return out
}

// All lists Modules, then the files mapped at offset 0 whose text is not
// in view (a core gdb's gcore wrote lists no mapping a file holds
// unchanged), by address: the objects whose data may be read (vtables).
// Files that are not ELF objects at all are among them.
func (t *Table) All() []*Module {
	out := t.Modules()
	seen := map[*Module]bool{}
	for _, m := range out {
		seen[m] = true
	}
	var rest []*Module
	for _, m := range t.mods {
		if !seen[m] {
			rest = append(rest, m)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Start < rest[j].Start })
	return append(out, rest...)
}

// Close closes every module's file.
func (t *Table) Close() {
	for _, m := range t.mods {
		m.close()
	}
	t.mods = map[fileKey]*Module{}
	t.ranges = nil
}
