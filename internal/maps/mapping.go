package maps

// Mapping is one line of /proc/PID/maps, with the smaps counters when they
// were read (all byte counts; zero when only maps was read).
type Mapping struct {
	Start, End uint64
	Perms      string // as the kernel prints it: "rw-p", "r-xp", "---p", ...
	Offset     uint64
	Dev        string
	Inode      uint64
	Path       string // file path, "[heap]", "[stack]", "[anon: name]", or ""
	Deleted    bool   // Path is a file since unlinked: it ends in " (deleted)"

	Rss, Pss                   uint64
	SharedClean, SharedDirty   uint64
	PrivateClean, PrivateDirty uint64
	Anonymous, AnonHugePages   uint64
	Swap                       uint64

	Class Class
}

// Size is the mapping's length in bytes.
func (m Mapping) Size() uint64 { return m.End - m.Start }

// Contains reports whether addr lies inside the mapping.
func (m Mapping) Contains(addr uint64) bool { return addr >= m.Start && addr < m.End }

func (m Mapping) Readable() bool   { return len(m.Perms) > 0 && m.Perms[0] == 'r' }
func (m Mapping) Writable() bool   { return len(m.Perms) > 1 && m.Perms[1] == 'w' }
func (m Mapping) Executable() bool { return len(m.Perms) > 2 && m.Perms[2] == 'x' }

// Range is an address range of a process, [Start, End): what a mapping
// spans, without what it is. The code that copies, dumps or leaves out
// parts of an address space (the heap walk's windows, the snapshot writer,
// the copy-on-write image) passes these; it is here, the lowest package
// all of them import, so that they pass the same type.
type Range struct{ Start, End uint64 }

// Class is what a mapping is used for, as far as the text can tell.
type Class int

const (
	ClassAnon        Class = iota // anonymous memory nobody else claims
	ClassMainHeap                 // [heap]: main arena's sbrk heap
	ClassArenaHeap                // non-main arena heap: rw part and its ---p reservation
	ClassMainStack                // [stack]
	ClassThreadStack              // a mapping holding some thread's stack pointer
	ClassExecutable               // the program's own file
	ClassSharedLib                // a shared object (.so)
	ClassFile                     // any other file mapping
	ClassSpecial                  // [vdso], [vvar], [vsyscall], ...
	numClasses
)

var classNames = [...]string{
	ClassAnon:        "anon",
	ClassMainHeap:    "main-heap",
	ClassArenaHeap:   "arena-heap",
	ClassMainStack:   "main-stack",
	ClassThreadStack: "thread-stack",
	ClassExecutable:  "executable",
	ClassSharedLib:   "shared-lib",
	ClassFile:        "file",
	ClassSpecial:     "special",
}

func (c Class) String() string {
	if c >= 0 && c < numClasses {
		return classNames[c]
	}
	return "unknown"
}
