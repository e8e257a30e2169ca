package libc

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
)

// Symbol is a libc symbol as it lies in the target: Value has the load bias
// applied. IFUNC symbols (memcpy, strlen...) carry their resolver's address.
type Symbol struct{ Value, Size uint64 }

// Libc is the target's libc: where it is mapped, which glibc it is, and its
// exported symbols.
type Libc struct {
	Path     string // as /proc/PID/maps shows it
	Base     uint64 // load bias: target address = Base + ELF virtual address
	Version  layouts.Version
	Banner   string // "GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36."
	BuildID  string // hex of NT_GNU_BUILD_ID; "" when the file has none
	Text     []maps.Mapping
	Mappings []maps.Mapping
	// Static is true when the "libc" is a static executable that carries
	// its own copy of glibc (FindStaticImage): Path is the executable.
	Static bool
	// VersionFrom says how Version was established when not from the
	// banner (static executables, memory alone); "" for the banner.
	VersionFrom string
	// MinVersion is set when the version could only be narrowed to a
	// range (libc known from a core's memory alone): MinVersion to
	// Version, the newest, whose malloc_info format is the one printed.
	MinVersion layouts.Version
	// Source says where a core's libc came from (SourceFile, ...); "" for
	// a live process.
	Source string
	// MallocDebug is true when this is libc_malloc_debug.so's own copy
	// of malloc (FindMallocDebugImage): Path is that library, Wrapped the
	// libc.so.6 whose malloc it wraps when MALLOC_CHECK_ is off.
	MallocDebug bool
	Wrapped     *Libc

	// RecordedTLS are the TLS offsets of a snapshot's Record: searched
	// instead of the file's GOT slots (TLSOffsets). nil without one.
	RecordedTLS []uint64

	syms map[string]Symbol // nil for a Libc without a file: Lookup finds nothing
	img  image
}

// Lookup returns a defined function or object of libc's dynamic symbol table,
// in target addresses. When a name has several versions it is the default
// one (name@@GLIBC_x), the one a program linked today would bind to.
func (l *Libc) Lookup(name string) (Symbol, bool) {
	s, ok := l.syms[name]
	return s, ok
}

// FileOpener opens the file that backs a mapping: for a live process through
// /proc/PID/map_files (so targets in containers work), for a core through a
// sysroot. The caller closes the file.
type FileOpener func(m maps.Mapping) (*os.File, error)

// ErrNoLibc means no glibc libc.so.6 is mapped: the target is static, uses
// musl, or is not a process at all.
var ErrNoLibc = errors.New("no glibc libc.so.6 is mapped in the target")

// libcName matches glibc's libc file: libc.so.6, or libc-2.NN.so up to 2.33
// (where libc.so.6 was a symlink that maps show resolved).
var libcName = regexp.MustCompile(`^(libc\.so\.6|libc-2\.[0-9]+\.so)$`)

// loaderName matches glibc's dynamic loader on any architecture, installed
// as ld-linux*.so.N or, up to 2.33, ld-2.NN.so. musl's ld-musl is not one.
var loaderName = regexp.MustCompile(`^(ld-linux[a-z0-9_-]*\.so\.[0-9]+|ld-2\.[0-9]+\.so)$`)

// BaseName is a mapping's file name without directories and without the
// " (deleted)" the kernel appends to unlinked files (e.g. after an upgrade).
func BaseName(path string) string {
	return filepath.Base(strings.TrimSuffix(path, " (deleted)"))
}

func isFileMapping(m maps.Mapping) bool { return strings.HasPrefix(m.Path, "/") }

func isLibc(m maps.Mapping) bool { return isFileMapping(m) && libcName.MatchString(BaseName(m.Path)) }

func isLoader(m maps.Mapping) bool {
	return isFileMapping(m) && loaderName.MatchString(BaseName(m.Path))
}

// OwnObject says whether m maps glibc's own code or data (libc.so.6 or
// ld.so), and names its file.
func OwnObject(m maps.Mapping) (name string, own bool) {
	return BaseName(m.Path), isLibc(m) || isLoader(m)
}

// FindLoader returns the executable mappings of glibc's dynamic loader
// (ld-linux-x86-64.so.2), none for a static or musl process.
func FindLoader(ms []maps.Mapping) []maps.Mapping {
	var text []maps.Mapping
	for _, m := range ms {
		if isLoader(m) && m.Executable() {
			text = append(text, m)
		}
	}
	return text
}

// FindLibc finds glibc's libc among the target's mappings and reads what
// arenactl needs from its file, opened through open: the load bias, the
// dynamic symbols, the build-id and the version banner.
func FindLibc(ms []maps.Mapping, open FileOpener) (*Libc, error) {
	m0, ok := LibcMapping(ms)
	if !ok {
		return nil, ErrNoLibc
	}
	return loadObject(ms, m0, "libc", open, func(ef *elf.File, l *Libc) (err error) {
		l.Banner, l.Version, err = Banner(ef)
		return err
	})
}

// LibcMapping returns libc's lowest mapping: the one that holds its ELF
// header when it maps the file from offset 0.
func LibcMapping(ms []maps.Mapping) (maps.Mapping, bool) {
	first := -1
	for i, m := range ms {
		if isLibc(m) && (first < 0 || m.Start < ms[first].Start) {
			first = i
		}
	}
	if first < 0 {
		return maps.Mapping{}, false
	}
	return ms[first], true
}

// loadObject reads the ELF file mapped at m0 (its lowest mapping), opened
// through open: the load bias, this load's mappings, the dynamic symbols,
// the build-id and the image of its data. version fills in Version. kind
// ("libc" or "executable") names the object in errors; an executable may
// lack dynamic symbols.
func loadObject(ms []maps.Mapping, m0 maps.Mapping, kind string, open FileOpener, version func(*elf.File, *Libc) error) (*Libc, error) {
	f, err := open(m0)
	if err != nil {
		return nil, fmt.Errorf("open %s %s: %w", kind, m0.Path, err)
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, m0.Path, err)
	}
	defer ef.Close()

	l := &Libc{Path: m0.Path, Static: kind == "executable"}
	fail := func(err error) (*Libc, error) { return nil, fmt.Errorf("%s %s: %w", kind, m0.Path, err) }
	lo, hi, err := loadBias(ef, m0)
	if err != nil {
		return fail(err)
	}
	l.Base = lo
	// Only the mappings of this load of the file: a second copy loaded by
	// dlmopen shows the same path at another address.
	for _, m := range ms {
		if m.Path == m0.Path && m.Start >= lo && m.Start < hi {
			l.Mappings = append(l.Mappings, m)
			if m.Executable() {
				l.Text = append(l.Text, m)
			}
		}
	}
	if l.syms, err = dynamicSymbols(ef, l.Base); err != nil {
		// A static executable exports nothing (a non-PIE one has no
		// .dynsym at all); libc always does.
		if !l.Static {
			return fail(err)
		}
		l.syms = map[string]Symbol{}
	}
	l.BuildID = module.BuildIDOf(ef)
	if l.img, err = readImage(ef); err != nil {
		return fail(err)
	}
	if err := version(ef, l); err != nil {
		return fail(err)
	}
	return l, nil
}

// loadBias is the load bias of the ELF file mapped at m (module.LoadBias),
// with the end of the object's image (bias + highest segment end) in the
// target.
func loadBias(ef *elf.File, m maps.Mapping) (bias, end uint64, err error) {
	bias, ok := module.LoadBias(ef, m)
	if !ok {
		return 0, 0, fmt.Errorf("no PT_LOAD segment is mapped at %#x (file offset %#x)", m.Start, m.Offset)
	}
	var maxEnd uint64
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			maxEnd = max(maxEnd, p.Vaddr+p.Memsz)
		}
	}
	return bias, bias + maxEnd, nil
}

// dynamicSymbols returns the defined functions and objects of .dynsym at
// their target addresses, preferring each name's default version.
func dynamicSymbols(ef *elf.File, bias uint64) (map[string]Symbol, error) {
	dyn, err := ef.DynamicSymbols()
	if err != nil {
		return nil, fmt.Errorf("read .dynsym: %w", err)
	}
	syms := make(map[string]Symbol, len(dyn))
	isDefault := make(map[string]bool, len(dyn))
	for _, s := range dyn {
		if !defines(s, elf.STT_FUNC, elf.STT_GNU_IFUNC, elf.STT_OBJECT) {
			continue
		}
		// A name without version info, or with a non-hidden one, is what
		// the linker binds new references to; hidden ones (name@GLIBC_x)
		// are kept for old binaries and only used if nothing else exists.
		def := !s.HasVersion || !s.VersionIndex.IsHidden()
		if _, seen := syms[s.Name]; seen && (isDefault[s.Name] || !def) {
			continue
		}
		syms[s.Name] = Symbol{Value: bias + s.Value, Size: s.Size}
		isDefault[s.Name] = def
	}
	return syms, nil
}

// defines reports whether s is a symbol of one of the given types that its
// object defines rather than imports.
func defines(s elf.Symbol, types ...elf.SymType) bool {
	if s.Section == elf.SHN_UNDEF || s.Name == "" {
		return false
	}
	for _, t := range types {
		if elf.ST_TYPE(s.Info) == t {
			return true
		}
	}
	return false
}

var releaseVersion = regexp.MustCompile(`release version ([0-9]+)\.([0-9]+)`)

// Banner finds csu/version.c's "GNU C Library ... release version 2.NN"
// in libc's read-only data and returns its first line and the version.
func Banner(ef *elf.File) (string, layouts.Version, error) {
	for _, b := range readOnlyData(ef) {
		if line, v, ok := FindBanner(b); ok {
			return line, v, nil
		}
	}
	return "", layouts.Version{}, errors.New(`no "GNU C Library ... release version" banner in its read-only data`)
}

// readOnlyData returns ef's .rodata, or its read-only segments when it has
// no section headers.
func readOnlyData(ef *elf.File) [][]byte {
	var data [][]byte
	if s := ef.Section(".rodata"); s != nil && s.Type != elf.SHT_NOBITS {
		if b, err := s.Data(); err == nil {
			data = append(data, b)
		}
	}
	if len(data) == 0 {
		for _, p := range ef.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W == 0 {
				if b, err := io.ReadAll(p.Open()); err == nil {
					data = append(data, b)
				}
			}
		}
	}
	return data
}

// FindBanner returns the first "GNU C Library" line of b that carries a
// release version.
func FindBanner(b []byte) (string, layouts.Version, bool) {
	for {
		i := bytes.Index(b, []byte("GNU C Library"))
		if i < 0 {
			return "", layouts.Version{}, false
		}
		b = b[i:]
		end := bytes.IndexAny(b, "\n\x00")
		if end < 0 {
			end = len(b)
		}
		line := string(b[:end])
		if m := releaseVersion.FindStringSubmatch(line); m != nil {
			major, err1 := strconv.Atoi(m[1])
			minor, err2 := strconv.Atoi(m[2])
			if err1 == nil && err2 == nil {
				return line, layouts.Version{Major: major, Minor: minor}, true
			}
		}
		b = b[len("GNU C Library"):]
	}
}

// IsLibcPath reports whether a mapped file's path names glibc's libc.
func IsLibcPath(path string) bool { return libcName.MatchString(BaseName(path)) }
