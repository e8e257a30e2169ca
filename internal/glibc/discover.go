package glibc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
)

// Anchors are the addresses (in the target) of the two statics every walk
// starts from. Neither is exported by libc: they are found without symbols.
type Anchors struct {
	MainArena uint64
	Mp        uint64
	Method    string // how MainArena was found, for the report
}

const maxArenas = 1024 // bounds every walk of the arena ring

// FindAnchors locates main_arena and mp_ for a libc of layout lay, with
// the debug files of DefaultDebugDirs when there are any.
func FindAnchors(l *libc.Libc, lay layouts.Layout, mem Memory) (Anchors, error) {
	return FindAnchorsWith(l, lay, mem, libc.DefaultDebugDirs)
}

// FindAnchorsWith locates main_arena and mp_, looking for a detached debug
// file only in debugDirs (none: no debug files). Symbols come first when
// there are any: the object's own .symtab (an unstripped static
// executable), else the debug file matching its build-id (under
// .build-id/, see DefaultDebugDirs). Without them, or when their main_arena
// fails the check against live memory, it reads the static initialisers in
// the object's file (main_arena.next points to main_arena itself; mp_ holds
// its defaults), and when the file gives no unique answer, it scans the
// object's writable memory for the run-time signature of main_arena: empty
// bins that point to themselves.
func FindAnchorsWith(l *libc.Libc, lay layouts.Layout, mem Memory, debugDirs []string) (Anchors, error) {
	sa, symErr := l.AnchorSymbols(debugDirs)
	if sa != nil {
		a := Anchors{MainArena: l.Base + sa.MainArena, Mp: l.Base + sa.Mp, Method: sa.From}
		err := checkMainArena(mem, lay, a.MainArena)
		if err == nil {
			return a, nil
		}
		symErr = fmt.Errorf("main_arena from %s at %#x: %w", sa.From, a.MainArena, err)
	}
	a, err := findAnchorsNoSymbols(l, lay, mem)
	switch {
	case err != nil && symErr != nil:
		err = fmt.Errorf("%w; %v", err, symErr)
	case symErr != nil:
		// Found all the same, but a symbol file that does not fit the
		// memory is worth knowing about.
		a.Method += fmt.Sprintf(" (symbols rejected: %v)", symErr)
	}
	return a, err
}

// findAnchorsNoSymbols finds the anchors from the file's static
// initialisers, falling back to a scan of memory for main_arena.
func findAnchorsNoSymbols(l *libc.Libc, lay layouts.Layout, mem Memory) (Anchors, error) {
	var a Anchors
	mp, mpErr := l.FindMp(lay)
	ma, maErr := l.FindMainArena(lay)
	if maErr == nil {
		a.MainArena, a.Method = l.Base+ma, "static initialiser in "+l.ObjectName()+"'s .data"
		if err := checkMainArena(mem, lay, a.MainArena); err != nil {
			maErr = fmt.Errorf("main_arena candidate at %#x: %w", a.MainArena, err)
		}
	}
	if maErr != nil {
		addr, err := scanMainArena(l, lay, mem)
		if err != nil {
			return a, fmt.Errorf("main_arena not found: %v; %v", maErr, err)
		}
		a.MainArena, a.Method = addr, "self-referential bins in "+l.ObjectName()+"'s memory"
	}
	if mpErr != nil {
		return a, fmt.Errorf("mp_ not found: %w", mpErr)
	}
	a.Mp = l.Base + mp
	return a, nil
}

// checkMainArena validates a main_arena candidate in live memory: its ring
// closes, and it looks initialised (self-referential bins) or untouched.
func checkMainArena(mem Memory, lay layouts.Layout, addr uint64) error {
	st, err := readBytes(mem, addr, uint64(lay.StateSize))
	if err != nil {
		return err
	}
	if self := selfBins(st, lay, addr); self == 0 && le(st, lay.StateTop) != 0 {
		return errors.New("no empty bin points to itself, yet top is set")
	}
	a := addr
	for i := 0; i < maxArenas; i++ {
		next, err := readWord(mem, a+uint64(lay.StateNext))
		if err != nil {
			return fmt.Errorf("arena ring: %w", err)
		}
		if next == addr {
			return nil
		}
		if next == 0 || next%16 != 0 {
			return fmt.Errorf("arena ring: arena %#x has next %#x", a, next)
		}
		a = next
	}
	return fmt.Errorf("arena ring does not close within %d arenas", maxArenas)
}

// selfBins counts the bins of the arena image st (at addr) whose fd and bk
// both point at the bin itself, as empty bins do once malloc is initialised.
func selfBins(st []byte, lay layouts.Layout, addr uint64) int {
	n := 0
	for i := 1; i < 128; i++ {
		off := lay.StateBins + int64(i-1)*16
		if off+16 > int64(len(st)) {
			break
		}
		self := addr + uint64(off) - 16
		if le(st, off) == self && le(st, off+8) == self {
			n++
		}
	}
	return n
}

// scanMainArena looks through libc's writable mappings for the arena with
// the most self-referential bins (malloc_init_state in malloc/malloc.c
// points every empty bin at itself).
func scanMainArena(l *libc.Libc, lay layouts.Layout, mem Memory) (uint64, error) {
	best, bestN := uint64(0), 0
	state := uint64(lay.StateSize)
	for _, m := range l.Mappings {
		if !m.Writable() {
			continue
		}
		// main_arena is in libc's .data, within its first megabytes
		// whatever size the mapping claims (a crafted core can claim
		// 2^45 bytes): read that much at most, a window at a time, and
		// go past windows memory does not have.
		end := m.Start + min(m.Size(), maxScan)
		buf := make([]byte, scanWindow+state)
		for w := m.Start; w+state <= end; {
			want := min(uint64(len(buf)), end-w)
			got, _ := mem.ReadAt(buf[:want], w)
			for off := uint64(0); off < scanWindow && off+state <= uint64(got); off += 16 {
				if n := selfBins(buf[off:off+state], lay, w+off); n > bestN {
					best, bestN = w+off, n
				}
			}
			if uint64(got) == want {
				w += scanWindow
			} else { // on past the page memory lacks
				w = (w + uint64(got) + pageSz) &^ (pageSz - 1)
			}
		}
	}
	if bestN < 64 {
		return 0, fmt.Errorf("no arena with self-referential bins in libc's writable memory (best: %d bins)", bestN)
	}
	return best, checkMainArena(mem, lay, best)
}

func le(b []byte, off int64) uint64 {
	if off < 0 || off+8 > int64(len(b)) {
		return 0
	}
	return binary.LittleEndian.Uint64(b[off:])
}

// Bounds of scanMainArena: how far into a writable mapping, and how much
// at a time.
const (
	maxScan    = 16 << 20
	scanWindow = 1 << 20
)

// maxRead bounds one readBytes: the structures read whole (an arena, mp_,
// headers, a note) are a few KiB; a size from damaged or crafted memory
// must not become an allocation of terabytes.
const maxRead = 64 << 20

func readBytes(mem Memory, addr, n uint64) ([]byte, error) {
	if n > maxRead {
		return nil, fmt.Errorf("reading %#x: %d bytes asked, more than any structure read whole", addr, n)
	}
	b := make([]byte, n)
	if _, err := mem.ReadAt(b, addr); err != nil {
		return nil, err
	}
	return b, nil
}

func readWord(mem Memory, addr uint64) (uint64, error) {
	var b [8]byte
	if _, err := mem.ReadAt(b[:], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// ArenaRing lists the arenas in ring order from main_arena, bounded and
// stopping at the first pointer that is not 16-aligned or unreadable.
func ArenaRing(mem Memory, lay layouts.Layout, a Anchors) []uint64 {
	ring := []uint64{a.MainArena}
	for cur := a.MainArena; len(ring) < maxArenas; {
		next, err := readWord(mem, cur+uint64(lay.StateNext))
		if err != nil || next == a.MainArena || next == 0 || next%16 != 0 {
			break
		}
		ring = append(ring, next)
		cur = next
	}
	return ring
}
