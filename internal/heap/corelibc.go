package heap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/maps"
)

// ErrNoLibc: none of a core's mappings is glibc's libc.so.6.
var ErrNoLibc = errors.New("no glibc libc.so.6 among the core's mappings")

// MemoryOnlyError: a core's allocator could not be found from its memory
// alone, and no libc file was there to read it with. Its libc's memory is
// damaged, or of a glibc no layout describes: the core is not usable
// (errkind.ErrBadCore) as it is, and a libc file might make it so
// (errkind.ErrMemoryOnly).
type MemoryOnlyError struct{ Err error }

func (e *MemoryOnlyError) Error() string { return e.Err.Error() }
func (e *MemoryOnlyError) Unwrap() error { return e.Err }

func (e *MemoryOnlyError) Is(target error) bool {
	return target == errkind.ErrMemoryOnly || target == errkind.ErrBadCore
}

// OpenCore finds a core's libc and its allocator, in this order: a
// snapshot's allocator record (no file needed); a libc file whose build-id
// is the one in the core's memory (o.LibcFile, the recorded path under the
// core's sysroot, then DIR/.build-id/xx/rest in each debug directory);
// memory alone. A file of another build is never used, even given as
// o.LibcFile: its offsets would be another libc's. What was tried and not
// used is in LibcNotes. A core of a static executable, without libc.so.6,
// is read through the executable's own allocator (openStaticCore).
func OpenCore(t *core.Target, o Options) (*Heap, error) {
	if err := walkable(t); err != nil {
		return nil, err
	}
	h := &Heap{T: t, SameFormat: true}
	first, hasLibc := libc.LibcMapping(t.Mappings())
	if b := t.Note(core.NoteAllocator); b != nil {
		if hasLibc {
			t.UseFile(first.Path, "") // the record stands for libc's file
		}
		rec, err := glibc.ParseRecord(b)
		if err == nil && rec.Static {
			t.UseFile(rec.Path, "") // the record stands for the executable's file too
		}
		if err == nil {
			h.Libc, h.Layout, h.Anchors, err = rec.Libc(t.Mappings(), t)
		}
		if err == nil {
			if h.Libc.MallocDebug {
				h.TcachesSkipped = noTcacheInMallocDebug
			}
			return h, nil
		}
		h.LibcNotes = append(h.LibcNotes, fmt.Sprintf("the snapshot's allocator note: %v", err))
	}
	if !hasLibc {
		return openStaticCore(t, o, h)
	}
	// From the core alone: a file must not vouch for itself.
	memID, idErr := glibc.BuildIDInMemory(t, first.Start)
	if o.NoLibcFile {
		h.LibcNotes = append(h.LibcNotes, "libc files: none looked for (--no-libc-file)")
	} else {
		for _, cand := range libcCandidates(t, o, first.Path, memID) {
			l, why, missing := tryLibc(t, cand.path, memID)
			if l == nil {
				if cand.always || !missing {
					h.LibcNotes = append(h.LibcNotes, why)
				}
				continue
			}
			t.UseFile(first.Path, cand.path)
			lay, err := layouts.LayoutFor(l.Version)
			if err != nil {
				return nil, err
			}
			anchors, err := glibc.FindAnchorsWith(l, lay, t, o.DebugDirs)
			if err != nil {
				h.LibcNotes = append(h.LibcNotes, fmt.Sprintf("libc file %s: %v", cand.path, err))
				continue
			}
			if memID == "" {
				h.LibcNotes = append(h.LibcNotes, fmt.Sprintf("libc's build-id is not in the core (%v): %s could not be checked", idErr, cand.path))
			}
			h.Libc, h.Layout, h.Anchors = l, lay, anchors
			return coreMallocDebug(t, h, o)
		}
	}
	t.UseFile(first.Path, "")
	mo, err := glibc.FromMemory(t.Mappings(), t)
	if err != nil {
		return nil, &MemoryOnlyError{Err: err}
	}
	mo.Libc.BuildID = memID
	h.Libc, h.Layout, h.Anchors, h.SameFormat = mo.Libc, mo.Layout, mo.Anchors, mo.SameFormat
	h.LibcNotes = append(h.LibcNotes, mo.Notes...)
	h.TcachesSkipped = "without libc's file the TLS slots of tcache and thread_arena are unknown: no thread's tcache was read, and chunks cached there count as in use"
	return coreMallocDebug(t, h, o)
}

// libcCandidate is a path where a core's libc may be; always says a missing
// file is worth a note (the recorded path, o.LibcFile).
type libcCandidate struct {
	path   string
	always bool
}

func libcCandidates(t *core.Target, o Options, recorded, buildID string) []libcCandidate {
	var out []libcCandidate
	if o.LibcFile != "" {
		out = append(out, libcCandidate{o.LibcFile, true})
	}
	out = append(out, libcCandidate{t.SysrootPath(trimDeleted(recorded)), true})
	if len(buildID) > 2 {
		// Where gdb looks for an object by build-id (Fedora installs
		// libc itself there, next to its .debug file).
		for _, d := range o.DebugDirs {
			out = append(out, libcCandidate{filepath.Join(d, ".build-id", buildID[:2], buildID[2:]), false})
		}
	}
	return out
}

// tryLibc reads the libc file at path as the core's libc; nil and the
// reason when it cannot be used: missing, unreadable, not glibc's libc, or
// of another build than the core's (memID, "" when the core lacks it).
func tryLibc(t *core.Target, path, memID string) (l *libc.Libc, why string, missing bool) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Sprintf("libc file %s: not found", path), true
	}
	l, err := libc.FindLibc(t.Mappings(), func(maps.Mapping) (*os.File, error) { return hostfs.OpenRegular(path) })
	switch {
	case err != nil:
		return nil, fmt.Sprintf("libc file %s: %v", path, err), false
	case memID != "" && l.BuildID != memID:
		id := l.BuildID
		if id == "" {
			id = "none"
		}
		return nil, fmt.Sprintf("libc file %s has build-id %s, the core's libc %s: another build, whose offsets would be wrong", path, id, memID), false
	}
	l.Source = glibc.SourceFile
	if memID == "" {
		l.Source = glibc.SourceFileUnchecked
	}
	return l, "", false
}
