package heap

import (
	"errors"
	"fmt"
	"os"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/maps"
)

// openStaticCore opens the allocator of a core without libc.so.6 whose
// executable is static: glibc's malloc is linked into the executable, so
// the executable's file is read as a live static process's is
// (libc.FindStaticImage). As with libc, a file stands for the core's
// executable only when its build-id is the one in the core's memory (the
// kernel dumps an ELF object's first page): another build's main_arena
// would be somewhere else. Candidates: the recorded path under the
// sysroot, then DIR/.build-id/xx/rest in each debug directory. Without
// one (or with NoLibcFile) the allocator is found in the executable's
// memory alone (glibc.FromMemoryStatic). ErrNoLibc when the core is not of
// a static executable.
func openStaticCore(t *core.Target, o Options, h *Heap) (*Heap, error) {
	exe := t.Process().Exe
	m0, ok := lowestMapping(t.Mappings(), exe)
	if !ok || len(libc.FindLoader(t.Mappings())) > 0 {
		// ld.so is mapped in every dynamic process from its exec on: a
		// dynamic program without libc, not a static one.
		return nil, ErrNoLibc
	}
	memID, idErr := glibc.BuildIDInMemory(t, m0.Start)
	// --libc names the object that holds the allocator: here, the
	// executable.
	var cands []libcCandidate
	var notes []string
	if o.NoLibcFile {
		notes = append(notes, "executable files: none looked for (--no-libc-file)")
	} else {
		cands = libcCandidates(t, o, exe, memID)
	}
	for _, cand := range cands {
		if _, err := os.Stat(cand.path); err != nil {
			if cand.always || !errors.Is(err, os.ErrNotExist) {
				notes = append(notes, fmt.Sprintf("executable %s: %v", cand.path, err))
			}
			continue
		}
		open := func(maps.Mapping) (*os.File, error) { return hostfs.OpenRegular(cand.path) }
		alloc, err := libc.DetectAllocator(t.Mappings(), exe, open)
		if err != nil {
			notes = append(notes, fmt.Sprintf("executable %s: %v", cand.path, err))
			continue
		}
		if alloc.Kind != libc.AllocStatic {
			// A dynamic program whose core lacks libc (it died before
			// libc was mapped, or its libc is elsewhere): not ours.
			t.UseFile(exe, "")
			return nil, fmt.Errorf("%w (the executable is %s)", ErrNoLibc, alloc.Name)
		}
		l, err := libc.FindStaticImage(t.Mappings(), exe, open)
		if err != nil {
			notes = append(notes, fmt.Sprintf("executable %s: %v", cand.path, err))
			continue
		}
		if memID != "" && l.BuildID != memID {
			id := l.BuildID
			if id == "" {
				id = "none"
			}
			notes = append(notes, fmt.Sprintf("executable %s has build-id %s, the core's executable %s: another build, whose offsets would be wrong", cand.path, id, memID))
			continue
		}
		t.UseFile(exe, cand.path)
		lay, err := layouts.LayoutFor(l.Version)
		if err != nil {
			return nil, err
		}
		anchors, err := glibc.FindAnchorsWith(l, lay, t, o.DebugDirs)
		if err != nil {
			notes = append(notes, fmt.Sprintf("executable %s: %v", cand.path, err))
			t.UseFile(exe, "")
			continue
		}
		l.Source = glibc.SourceStaticFile
		if memID == "" {
			l.Source = glibc.SourceStaticFileUnchecked
			notes = append(notes, fmt.Sprintf("the executable's build-id is not in the core (%v): %s could not be checked", idErr, cand.path))
		}
		h.Libc, h.Layout, h.Anchors = l, lay, anchors
		h.LibcNotes = append(h.LibcNotes, notes...)
		return h, nil
	}
	t.UseFile(exe, "")
	h.LibcNotes = append(h.LibcNotes, notes...)
	mo, err := glibc.FromMemoryStatic(t.Mappings(), t, exe)
	if err != nil {
		return nil, &StaticCoreError{Exe: exe, Notes: h.LibcNotes, Err: err}
	}
	mo.Libc.BuildID = memID
	h.Libc, h.Layout, h.Anchors, h.SameFormat = mo.Libc, mo.Layout, mo.Anchors, mo.SameFormat
	h.LibcNotes = append(h.LibcNotes, mo.Notes...)
	if !mo.HasTLS() {
		h.TcachesSkipped = "the executable's TLS block is not in the core: no thread's tcache was read, and chunks cached there count as in use"
	}
	return h, nil
}

// StaticCoreError: a core of a static executable whose file could not be
// used (missing, or of another build), and whose allocator memory alone
// did not find (Err: none found, or several places that fit).
type StaticCoreError struct {
	Exe   string
	Notes []string
	Err   error
}

func (e *StaticCoreError) Error() string {
	s := fmt.Sprintf("the core is of a static executable (%s) whose file could not be used, and memory alone did not find its allocator: %v", e.Exe, e.Err)
	for _, n := range e.Notes {
		s += "; " + n
	}
	return s
}

func (e *StaticCoreError) Unwrap() error { return e.Err }

func (e *StaticCoreError) Is(target error) bool { return target == errkind.ErrMemoryOnly }

// lowestMapping is the mapping of path at the lowest address: where its
// ELF header is.
func lowestMapping(ms []maps.Mapping, path string) (maps.Mapping, bool) {
	var m0 maps.Mapping
	found := false
	for _, m := range ms {
		if path != "" && m.Path == path && (!found || m.Start < m0.Start) {
			m0, found = m, true
		}
	}
	return m0, found
}
