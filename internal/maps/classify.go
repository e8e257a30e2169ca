package maps

import (
	"path"
	"strings"
)

// HeapMaxSize is glibc's HEAP_MAX_SIZE on 64-bit targets (2 *
// DEFAULT_MMAP_THRESHOLD_MAX). Every non-main arena heap is mmapped at an
// address aligned to it and never grows beyond it, which is what lets
// glibc find a chunk's heap_info by masking the chunk address, and what
// lets us find heaps in the maps.
const HeapMaxSize = 64 << 20

// Limits of the pthread stack guess for threads whose stack pointer is
// unknown: glibc's guard is a page by default (pthread_attr_setguardsize
// can raise it), and its smallest stack is far above 64 KiB in practice.
const (
	maxGuardSize    = 1 << 20
	minPthreadStack = 64 << 10
)

// Names glibc ≥ 2.39 gives its mappings when the glibc.mem.decorate_maps
// tunable is on; maps shows them as "[anon: " + name + "]". Stack names
// end in the thread id.
const (
	anonArenaName     = "glibc: malloc arena"
	anonStackName     = "glibc: pthread stack:"
	anonUserStackName = "glibc: pthread user stack:"
)

// Hints is what Classify knows about the process beyond its mappings.
type Hints struct {
	// ExePath is the executable's path (readlink /proc/PID/exe, see
	// ExePath); empty when unknown.
	ExePath string
	// StackPointers maps thread ids to user stack pointers (see
	// StackPointers); threads not in it are found by the guard-page
	// heuristic only.
	StackPointers map[int]uint64
}

// Classify sets the Class of every mapping in ms, which must be sorted by
// address as the kernel prints them: heaps and stacks are recognized partly
// by their neighbors.
func Classify(ms []Mapping, h Hints) {
	exe := strings.TrimSuffix(h.ExePath, deletedSuffix)
	for i := range ms {
		ms[i].Class = classByPath(&ms[i], exe)
	}
	markArenaHeaps(ms)
	markThreadStacks(ms, h.StackPointers)
}

// anonName returns the name of a named anonymous mapping ("[anon: x]"
// gives "x") and whether the mapping is anonymous at all.
func anonName(m *Mapping) (name string, anon bool) {
	if m.Path == "" {
		return "", true
	}
	// [anon_shmem:name] is a named shared anonymous mapping (Linux ≥ 6.2).
	for _, prefix := range []string{"[anon:", "[anon_shmem:"} {
		if rest, ok := strings.CutPrefix(m.Path, prefix); ok {
			if name, ok := strings.CutSuffix(rest, "]"); ok {
				return strings.TrimSpace(name), true
			}
		}
	}
	return "", false
}

func classByPath(m *Mapping, exe string) Class {
	if name, anon := anonName(m); anon {
		switch {
		case name == anonArenaName:
			return ClassArenaHeap
		case strings.HasPrefix(name, anonStackName), strings.HasPrefix(name, anonUserStackName):
			return ClassThreadStack
		}
		return ClassAnon
	}
	switch {
	case m.Path == "[heap]":
		return ClassMainHeap
	case m.Path == "[stack]":
		return ClassMainStack
	case strings.HasPrefix(m.Path, "[stack:"):
		// Linux 3.4 to 4.4 named thread stacks "[stack:TID]".
		return ClassThreadStack
	case strings.HasPrefix(m.Path, "["):
		return ClassSpecial
	}
	file := strings.TrimSuffix(m.Path, deletedSuffix)
	switch {
	case exe != "" && file == exe:
		return ClassExecutable
	case isSharedLib(file):
		return ClassSharedLib
	}
	return ClassFile
}

// isSharedLib matches base names like libc.so.6, libc-2.31.so and
// ld-linux-x86-64.so.2.
func isSharedLib(p string) bool {
	base := path.Base(p)
	return strings.HasSuffix(base, ".so") || strings.Contains(base, ".so.")
}

// isPlainAnon reports whether m is anonymous memory nothing has claimed
// yet, with exactly the given perms.
func isPlainAnon(m *Mapping, perms string) bool {
	_, anon := anonName(m)
	return anon && m.Class == ClassAnon && m.Perms == perms
}

// markArenaHeaps finds unnamed non-main arena heaps. glibc mmaps a heap
// as HeapMaxSize of PROT_NONE at an aligned address and mprotects the part
// in use read-write, so a heap shows as an aligned rw-p mapping followed
// by its ---p reservation tail. Two heaps' rw parts only touch, and so
// merge into one mapping, when the lower heap is fully used; hence an
// aligned rw-p mapping of any size, its tail reaching at most to the next
// HeapMaxSize boundary past its end.
func markArenaHeaps(ms []Mapping) {
	for i := 0; i < len(ms); i++ {
		m := &ms[i]
		if m.Start%HeapMaxSize != 0 || !isPlainAnon(m, "rw-p") {
			continue
		}
		m.Class = ClassArenaHeap
		limit := alignUp(m.End, HeapMaxSize)
		if tail := next(ms, i); tail != nil && isPlainAnon(tail, "---p") && tail.End <= limit {
			tail.Class = ClassArenaHeap
			i++
		}
		// A spare aligned reservation right after the heap belongs with it
		// too; glibc only ever makes those for heaps.
		if res := next(ms, i); res != nil && res.Start%HeapMaxSize == 0 &&
			isPlainAnon(res, "---p") && res.Size() <= HeapMaxSize {
			res.Class = ClassArenaHeap
			i++
		}
	}
}

// markThreadStacks marks the anonymous writable mappings holding a
// thread's stack pointer, then guesses the rest from glibc's layout: a
// pthread stack is one mmap whose lowest pages are mprotected to a ---p
// guard. Mappings already claimed (a heap that a coroutine's stack was
// malloced from, [stack]) are left alone.
func markThreadStacks(ms []Mapping, sps map[int]uint64) {
	for _, sp := range sps {
		i, ok := index(ms, sp)
		if !ok {
			continue
		}
		m := &ms[i]
		if _, anon := anonName(m); anon && m.Class == ClassAnon && m.Writable() {
			m.Class = ClassThreadStack
			markGuard(ms, i)
		}
	}
	for i := range ms {
		m := &ms[i]
		switch {
		case m.Class == ClassThreadStack:
			markGuard(ms, i) // named by glibc, or found above
		case isPlainAnon(m, "rw-p") && m.Size() >= minPthreadStack && markGuard(ms, i):
			m.Class = ClassThreadStack
		}
	}
}

// markGuard marks the guard mapping directly below the stack ms[i] as
// part of the stack, and reports whether there was one.
func markGuard(ms []Mapping, i int) bool {
	if i == 0 {
		return false
	}
	g := &ms[i-1]
	if g.End != ms[i].Start || g.Size() > maxGuardSize || !isPlainAnon(g, "---p") {
		return false
	}
	g.Class = ClassThreadStack
	return true
}

// next returns the mapping after ms[i] if it starts where ms[i] ends.
func next(ms []Mapping, i int) *Mapping {
	if i+1 < len(ms) && ms[i+1].Start == ms[i].End {
		return &ms[i+1]
	}
	return nil
}

func alignUp(x, align uint64) uint64 {
	if x%align == 0 {
		return x
	}
	return x - x%align + align
}
