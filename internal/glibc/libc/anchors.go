package libc

import (
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
)

// AnchorSymbols returns main_arena and mp_ at their link-time addresses
// from l's own .symtab, else from the debug file of its build-id in dirs;
// nil and no error when neither exists.
func (l *Libc) AnchorSymbols(dirs []string) (*SymbolAnchors, error) {
	if l.img.syms != nil {
		sa := *l.img.syms
		sa.From = "symbols in " + l.Path
		return &sa, nil
	}
	sa, err := debugAnchors(l.BuildID, dirs)
	if errors.Is(err, errNoDebugFile) {
		return nil, nil
	}
	return sa, err
}

// FindMainArena returns the link-time address of main_arena of layout lay
// from the static initialisers in the object's file (image.findMainArena).
func (l *Libc) FindMainArena(lay layouts.Layout) (uint64, error) { return l.img.findMainArena(lay) }

// FindMp returns the link-time address of mp_ of layout lay from its
// static initialiser in the object's file (image.findMp).
func (l *Libc) FindMp(lay layouts.Layout) (uint64, error) { return l.img.findMp(lay) }

// ObjectName says which object holds the allocator, for method strings:
// libc, or the executable when it is static.
func (l *Libc) ObjectName() string {
	if l.Static {
		return "the executable"
	}
	if l.MallocDebug {
		return BaseName(l.Path)
	}
	return "libc"
}

// findMainArena returns the link-time address of main_arena: the one
// object in .data whose next field holds its own address.
func (img *image) findMainArena(lay layouts.Layout) (uint64, error) {
	var found []uint64
	n := uint64(len(img.data))
	for off := uint64(0); off+8 <= n; off += 8 {
		x := img.dataAddr + off
		v, _ := img.word(x)
		if v+uint64(lay.StateNext) != x || v < img.dataAddr {
			continue
		}
		// attached_threads is initialised to 1 where it exists (2.23+);
		// before, the word at system_mem's place is 0.
		if lay.StateAttached >= 0 {
			if w, ok := img.word(v + uint64(lay.StateAttached)); !ok || w != 1 {
				continue
			}
		} else if w, ok := img.word(v + uint64(lay.StateSystemMem)); !ok || w != 0 {
			continue
		}
		found = append(found, v)
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d candidates for main_arena's static initialiser in .data", len(found))
	}
	return found[0], nil
}

// findMp returns the link-time address of mp_ from its default values.
func (img *image) findMp(lay layouts.Layout) (uint64, error) {
	var found []uint64
	n := uint64(len(img.data))
	for off := uint64(0); off+uint64(lay.MpSize) <= n; off += 8 {
		c := img.dataAddr + off
		if !img.is(c+uint64(lay.MpTrimThreshold), layouts.DefaultThreshold) || !img.is(c+uint64(lay.MpTopPad), layouts.DefaultThreshold) ||
			!img.is(c+uint64(lay.MpMmapThreshold), layouts.DefaultThreshold) || !img.is(c+uint64(lay.MpArenaTest), layouts.DefaultArenaTest) ||
			!img.is(c+uint64(lay.MpArenaMax), 0) {
			continue
		}
		if w, _ := img.word(c + uint64(lay.MpNMmapsMax)); uint32(w) != layouts.DefaultMmapMax {
			continue
		}
		// tcache_count defaults to 7; 2.43 raised it to 16.
		if lay.MpTcacheCount >= 0 && !img.is(c+uint64(lay.MpTcacheCount), 7) && !img.is(c+uint64(lay.MpTcacheCount), 16) {
			continue
		}
		found = append(found, c)
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d candidates for mp_'s static initialiser in .data", len(found))
	}
	return found[0], nil
}

func (img *image) is(addr, want uint64) bool {
	w, ok := img.word(addr)
	return ok && w == want
}
