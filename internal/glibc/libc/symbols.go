package libc

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/module"
)

// DefaultDebugDirs is where distributions install detached debug files
// (Debian's libc6-dbg and *-dbgsym packages, Fedora's debuginfo), each under
// .build-id/xx/rest.debug: gdb's default debug-file-directory.
var DefaultDebugDirs = []string{"/usr/lib/debug"}

// SymbolAnchors are main_arena and mp_ at their link-time addresses, as a
// symbol table gives them, and which table that was.
type SymbolAnchors struct {
	MainArena, Mp uint64
	From          string
}

// symtabAnchors reads main_arena and mp_ from ef's .symtab. Both are static
// in malloc.c, so they are local objects there and never in .dynsym.
func symtabAnchors(ef *elf.File) (*SymbolAnchors, error) {
	syms, err := ef.Symbols()
	if err != nil {
		return nil, err
	}
	var sa SymbolAnchors
	seen := map[string]int{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_OBJECT || elf.ST_BIND(s.Info) != elf.STB_LOCAL || s.Section == elf.SHN_UNDEF {
			continue
		}
		switch s.Name {
		case "main_arena":
			sa.MainArena = s.Value
		case "mp_":
			sa.Mp = s.Value
		default:
			continue
		}
		seen[s.Name]++
	}
	// Two local objects of one name would be two copies of malloc.c (a
	// program that links its own): the table cannot say which one runs.
	if seen["main_arena"] != 1 || seen["mp_"] != 1 {
		return nil, fmt.Errorf(".symtab has %d main_arena and %d mp_ objects", seen["main_arena"], seen["mp_"])
	}
	return &sa, nil
}

// DebugFile returns the path of the detached debug file of the object with
// the given build-id under the first of dirs that has one.
func DebugFile(id string, dirs []string) (string, bool) {
	if len(id) < 3 {
		return "", false
	}
	for _, d := range dirs {
		p := filepath.Join(d, ".build-id", id[:2], id[2:]+".debug")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

// errNoDebugFile: no debug file for the build-id in any directory searched.
var errNoDebugFile = errors.New("no debug file")

// debugAnchors reads main_arena and mp_ from the detached debug file of the
// object with the given build-id. These are local files of the machine
// arenactl runs on, matched by build-id as gdb matches them, so a target
// in a container still gets the right one when the host has it.
func debugAnchors(id string, dirs []string) (*SymbolAnchors, error) {
	p, ok := DebugFile(id, dirs)
	if !ok {
		return nil, errNoDebugFile
	}
	// A regular file only: the build-id comes from the target or a core,
	// and a FIFO at its path would block the open for ever.
	f, err := hostfs.OpenRegular(p)
	if err != nil {
		return nil, fmt.Errorf("debug file %s: %w", p, err)
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("debug file %s: %w", p, err)
	}
	// The path only claims the build-id; a stale file left behind by an
	// upgrade under a wrong name must not lend its addresses.
	if got := module.BuildIDOf(ef); got != "" && got != id {
		return nil, fmt.Errorf("debug file %s has build-id %s", p, got)
	}
	sa, err := symtabAnchors(ef)
	if err != nil {
		return nil, fmt.Errorf("debug file %s: %w", p, err)
	}
	sa.From = fmt.Sprintf("debug symbols (build-id %s, %s)", id, p)
	return sa, nil
}
