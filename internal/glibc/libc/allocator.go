package libc

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/arenactl/arenactl/internal/maps"
)

// AllocatorKind says whose malloc a process runs, which decides whether
// glibc's arenas mean anything.
type AllocatorKind int

const (
	AllocGlibc      AllocatorKind = iota // glibc's ptmalloc in libc.so.6
	AllocInterposed                      // another object defines malloc: jemalloc, tcmalloc, ASan...
	AllocMusl                            // musl libc: no ptmalloc at all
	AllocStatic                          // static executable: no libc.so.6 to inject into
	AllocUnknown                         // none of the above could be established
	// AllocStaticOther: a static executable with no glibc malloc linked
	// in (a Go program, a static musl or other libc): nothing to read.
	AllocStaticOther
)

var allocatorKindNames = [...]string{
	AllocGlibc:       "glibc",
	AllocInterposed:  "interposed",
	AllocMusl:        "musl",
	AllocStatic:      "static",
	AllocUnknown:     "unknown",
	AllocStaticOther: "static-other",
}

func (k AllocatorKind) String() string {
	if k >= 0 && int(k) < len(allocatorKindNames) {
		return allocatorKindNames[k]
	}
	return "unknown"
}

// Allocator is the verdict of DetectAllocator.
type Allocator struct {
	Kind AllocatorKind
	Name string // for people: "glibc", "jemalloc (libjemalloc.so.2)", ...
	Path string // the object that provides malloc, as maps shows it; "" if none
	// MallocDebug: the interposer is glibc's own libc_malloc_debug.so,
	// whose allocator can be read (FindMallocDebugImage), not called.
	MallocDebug bool
}

// muslName matches musl's libc: ld-musl-ARCH.so.1 (Alpine and others) and
// libc.musl-ARCH.so.1. Debian's musl maps as .../x86_64-linux-musl/libc.so,
// which isMusl recognises by its directory.
var muslName = regexp.MustCompile(`^(ld-musl-.*\.so\.1|libc\.musl-.*)$`)

func isMusl(m maps.Mapping) bool {
	if !isFileMapping(m) {
		return false
	}
	base := BaseName(m.Path)
	return muslName.MatchString(base) ||
		(strings.HasPrefix(base, "libc.so") && strings.Contains(m.Path, "-linux-musl/"))
}

// knownAllocators gives friendly names to objects that replace malloc,
// matched on the file's base name.
var knownAllocators = []struct{ prefix, name string }{
	{"libjemalloc", "jemalloc"},
	{"libtcmalloc", "tcmalloc"},
	{"libmimalloc", "mimalloc"},
	{"libc_malloc_debug", "glibc malloc-debug"}, // its own copy of malloc.c (via malloc/malloc-check.c, 2.34+)
	{"libasan", "AddressSanitizer"},
	{"vgpreload_memcheck", "valgrind memcheck"},
}

// DetectAllocator decides whose malloc the process runs, from its mappings
// and the dynamic symbols of the objects they map (opened through open).
// exePath is the program's path (/proc/PID/exe), used for static programs.
//
// A process counts as interposed when any object other than libc and ld.so
// (the executable included) defines malloc or free in its .dynsym: the
// dynamic linker binds everybody's malloc to the first definition in search
// order, and libc comes after the executable, LD_PRELOAD and, in practice,
// the allocator libraries a program links.
func DetectAllocator(ms []maps.Mapping, exePath string, open FileOpener) (Allocator, error) {
	var libc *maps.Mapping
	hasLoader := false
	for i, m := range ms {
		switch {
		case isMusl(m):
			return Allocator{Kind: AllocMusl, Name: "musl", Path: m.Path}, nil
		case isLibc(m) && libc == nil:
			libc = &ms[i]
		case isLoader(m):
			hasLoader = true
		}
	}
	if libc == nil && !hasLoader {
		return detectStatic(ms, exePath, open)
	}

	for _, obj := range elfObjects(ms, exePath) {
		name, ok, err := definesMalloc(obj, open)
		if err != nil {
			return Allocator{Kind: AllocUnknown}, err
		}
		if ok {
			return Allocator{Kind: AllocInterposed, Name: name, Path: obj.Path, MallocDebug: isMallocDebug(obj)}, nil
		}
	}
	if libc == nil {
		// An ld.so but no glibc libc: nothing we know how to read.
		return Allocator{Kind: AllocUnknown, Name: "unknown (ld.so without libc.so.6)"}, nil
	}
	return Allocator{Kind: AllocGlibc, Name: "glibc", Path: libc.Path}, nil
}

// elfObjects returns, once per file, the mapping at file offset 0 of every
// object that may be an ELF other than libc and ld.so: the executable first
// (it comes first in symbol search order), then in address order.
func elfObjects(ms []maps.Mapping, exePath string) []maps.Mapping {
	exe := strings.TrimSuffix(exePath, " (deleted)")
	var objs []maps.Mapping
	seen := map[string]bool{}
	for _, m := range ms {
		p := strings.TrimSuffix(m.Path, " (deleted)")
		if m.Offset != 0 || !isFileMapping(m) || m.Inode == 0 || seen[p] || isLibc(m) || isLoader(m) {
			continue
		}
		// Never open device files: mapping a GPU or /dev/mem is legal,
		// opening them again may not be harmless. /dev/shm is plain memory.
		if strings.HasPrefix(p, "/dev/") && !strings.HasPrefix(p, "/dev/shm/") {
			continue
		}
		seen[p] = true
		if p == exe {
			objs = append([]maps.Mapping{m}, objs...)
		} else {
			objs = append(objs, m)
		}
	}
	return objs
}

// definesMalloc reports whether the object mapped at m defines malloc or
// free, and a friendly name for it. Files that are not ELF are skipped.
func definesMalloc(m maps.Mapping, open FileOpener) (string, bool, error) {
	f, err := open(m)
	if err != nil {
		return "", false, fmt.Errorf("open %s to look for a malloc: %w", m.Path, err)
	}
	defer f.Close()
	if !isELF(f) {
		return "", false, nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", false, nil // ELF magic but not an object we can read: not an allocator
	}
	defer ef.Close()
	syms, err := ef.DynamicSymbols()
	if err != nil {
		// No .dynsym (a non-PIE executable exports nothing): it cannot
		// interpose anything.
		return "", false, nil
	}
	for _, s := range syms {
		if (s.Name == "malloc" || s.Name == "free") && defines(s, elf.STT_FUNC, elf.STT_GNU_IFUNC) &&
			elf.ST_BIND(s.Info) != elf.STB_LOCAL {
			return allocatorName(m.Path), true, nil
		}
	}
	return "", false, nil
}

func isELF(r io.ReaderAt) bool {
	var magic [4]byte
	_, err := r.ReadAt(magic[:], 0)
	return err == nil && string(magic[:]) == elf.ELFMAG
}

func allocatorName(path string) string {
	base := BaseName(path)
	for _, k := range knownAllocators {
		if strings.HasPrefix(base, k.prefix) {
			return k.name + " (" + base + ")"
		}
	}
	return base
}

// detectStatic confirms that a process without libc.so.6 and ld.so runs a
// static executable: no PT_INTERP and no DT_NEEDED.
func detectStatic(ms []maps.Mapping, exePath string, open FileOpener) (Allocator, error) {
	f, err := openExe(ms, exePath, open)
	if err != nil {
		return Allocator{Kind: AllocUnknown}, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return Allocator{Kind: AllocUnknown}, fmt.Errorf("executable %s: %w", exePath, err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return Allocator{Kind: AllocUnknown, Name: "unknown (dynamic executable without ld.so mapped)", Path: exePath},
				nil
		}
	}
	if needed, err := ef.DynString(elf.DT_NEEDED); err == nil && len(needed) > 0 {
		return Allocator{Kind: AllocUnknown, Name: "unknown (executable needs " + strings.Join(needed, ", ") + ")", Path: exePath},
			nil
	}
	name := "static executable"
	if _, v, err := Banner(ef); err == nil {
		name = "static executable, glibc " + v.String()
	} else if !hasGlibcMalloc(ef) {
		return Allocator{Kind: AllocStaticOther, Name: "static executable without glibc malloc", Path: exePath}, nil
	}
	return Allocator{Kind: AllocStatic, Name: name, Path: exePath}, nil
}

// glibcMallocStrings: glibc's malloc/malloc.c is one object, linked whole
// into a static executable that allocates (every glibc one does: its
// start-up code does), and it holds malloc_info's opening tag and free's
// error message in every version from 2.17 to 2.43.
var glibcMallocStrings = []string{`<malloc version="1">`, "free(): invalid pointer"}

// hasGlibcMalloc reports whether ef's read-only data holds glibc malloc's
// strings: a Go program or a static musl one has none.
func hasGlibcMalloc(ef *elf.File) bool {
	for _, b := range readOnlyData(ef) {
		for _, s := range glibcMallocStrings {
			if strings.Contains(string(b), s) {
				return true
			}
		}
	}
	return false
}

// openExe opens the executable through the mapping that shows its path (so
// a container's file is the one read), or by path when none does.
func openExe(ms []maps.Mapping, exePath string, open FileOpener) (*os.File, error) {
	exe := strings.TrimSuffix(exePath, " (deleted)")
	for _, m := range ms {
		if m.Offset == 0 && strings.TrimSuffix(m.Path, " (deleted)") == exe {
			f, err := open(m)
			if err != nil {
				return nil, fmt.Errorf("open executable %s: %w", exePath, err)
			}
			return f, nil
		}
	}
	if exePath == "" {
		return nil, errors.New("no libc.so.6 mapped and no executable path to check for a static program")
	}
	f, err := os.Open(exePath)
	if err != nil {
		return nil, fmt.Errorf("open executable: %w", err)
	}
	return f, nil
}
