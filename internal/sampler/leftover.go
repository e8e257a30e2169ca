package sampler

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/implant"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/procfs"
)

// A leftover is a sampler an earlier arenactl placed and did not remove
// (it was killed): its hooks may still be in the GOT.
type leftover struct {
	base, size   uint64
	creator      int
	creatorStart uint64
	patches      [][3]uint64 // slot, orig, hook
}

// ActiveError: another arenactl, still running, samples the process.
type ActiveError struct {
	Pid, Creator int
}

func (e *ActiveError) Error() string {
	return fmt.Sprintf("process %d is being profiled by another arenactl (pid %d)", e.Pid, e.Creator)
}

// Is: the other arenactl holds the process as another tracer would
// (errkind.ErrTraced).
func (e *ActiveError) Is(target error) bool { return target == errkind.ErrTraced }

// findLeftovers looks for samplers in t's mappings: an anonymous r-x page
// followed by data that starts with the sampler's mark.
func findLeftovers(t *live.Target) ([]leftover, error) {
	var out []leftover
	ms := t.Mappings()
	for i, m := range ms {
		if m.Path != "" || m.Perms != "r-xp" || m.End-m.Start != dataOff || i+1 == len(ms) || ms[i+1].Start != m.End {
			continue
		}
		hdr := make([]byte, cfgPatches)
		if _, err := t.ReadAt(hdr, m.Start+symCfg); err != nil || !bytes.Equal(hdr[:8], []byte(magic)) {
			continue
		}
		le := binary.LittleEndian
		l := leftover{base: m.Start, size: le.Uint64(hdr[cfgImageSize:]), creator: int(le.Uint64(hdr[cfgCreator:])),
			creatorStart: le.Uint64(hdr[cfgCreator+8:])}
		n := min(le.Uint64(hdr[cfgNPatches:]), maxPatches)
		tab := make([]byte, 24*n)
		if _, err := t.ReadAt(tab, m.Start+symCfg+cfgPatches); err != nil {
			return nil, err
		}
		for j := uint64(0); j < n; j++ {
			l.patches = append(l.patches, [3]uint64{le.Uint64(tab[24*j:]), le.Uint64(tab[24*j+8:]), le.Uint64(tab[24*j+16:])})
		}
		// A sampler its own arenactl gave up (enabled 0: it could not be
		// unmapped then) is a leftover even while that arenactl runs.
		if le.Uint64(hdr[cfgEnabled:]) != 0 && (procfs.Identity{Pid: l.creator, Start: l.creatorStart}).Alive() {
			return nil, &ActiveError{Pid: t.Pid, Creator: l.creator}
		}
		out = append(out, l)
	}
	return out, nil
}

// removeLeftover undoes what a killed arenactl's sampler changed: the GOT
// entries that still hold its hooks get their original contents back, its
// slow paths stop, and it is unmapped unless a thread may still run in it.
// Runs frozen. It returns what it did, for the user.
func removeLeftover(t *live.Target, c *live.FrozenCaller, l leftover) (string, error) {
	var w [8]byte
	le := binary.LittleEndian
	restored := 0
	for _, p := range l.patches {
		if _, err := c.ReadAt(w[:], p[0]); err != nil || le.Uint64(w[:]) != p[2] {
			continue
		}
		le.PutUint64(w[:], p[1])
		if _, err := c.WriteAt(w[:], p[0]); err != nil {
			return "", err
		}
		restored++
	}
	le.PutUint64(w[:], 0)
	if _, err := c.WriteAt(w[:], l.base+symCfg+cfgEnabled); err != nil {
		return "", err
	}
	what := fmt.Sprintf("the sampler an earlier arenactl (pid %d) left at %#x: %d GOT entries restored", l.creator, l.base, restored)
	if why := busyAt(t, c, l.base); why != "" {
		return what + fmt.Sprintf("; its %d bytes stay, inert (%s)", l.size, why), nil
	}
	if err := implant.Unmap(c, l.base, l.size); err != nil {
		return what + fmt.Sprintf("; its %d bytes stay, inert (munmap failed: %v)", l.size, err), nil
	}
	return what + ", removed", nil
}
