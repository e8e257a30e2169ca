package report

import "time"

// Contents is what the heap holds (arenactl heap): every allocated chunk
// classified by reachability and by type, the leaked ones grouped with
// examples, and what keeps free memory in each arena.
type Contents struct {
	Pid     int
	Exe     string
	Threads int
	Libc    LibcInfo
	Core    *CoreInfo // when read from a core or snapshot
	Hold    string    // how a live process was held: "image", "walk"
	Frozen  time.Duration

	Chunks, Bytes         uint64 // allocated chunks (the objects)
	FreeChunks, FreeBytes uint64 // chunks malloc holds free (bins, fastbins, tcaches, tops)
	Classes               []ClassCount
	Types                 []TypeCount // by bytes, largest first
	Leaks                 []LeakGroup // by bytes, largest first
	Arenas                []ArenaPin
	// Roots: how many roots of each kind were scanned, and their bytes;
	// Unread is how many root bytes could not be read (a snapshot keeps
	// only what a walk needs: see the README), UnreadIn where, most first.
	Roots            []RootCount
	RootBytes        uint64
	Unread           uint64
	UnreadIn         []UnreadPlace
	ChunkBytes       uint64 // chunk bytes read by the scan
	Vtables          int    // vtable symbols known
	Scan             time.Duration
	IndexBits        uint64 // the chunk index's and the marks' size, in bits
	Sweeps           int    // the scan's passes over the heap in address order
	InteriorPointers bool   // a pointer into a chunk's middle references it
	// Lookups answer the addresses asked about (--addr), in their order.
	Lookups []Lookup
}

// UnreadPlace is where root bytes could not be read: a mapped file's path,
// "anonymous memory", "the stack of thread N", "the TLS of thread N".
type UnreadPlace struct {
	Where string
	Bytes uint64
}

// Lookup is what holds one address: an allocated chunk (Found), its
// reachability class and type, or nothing the program holds.
type Lookup struct {
	Addr        uint64
	Found       bool
	Chunk, Size uint64 // the chunk's user pointer and its size
	Class, Type string
}

// ClassCount is one reachability class's chunks.
type ClassCount struct {
	Class        string // "static", "stack", "leaked", "leaked (only from leaked)"
	Count, Bytes uint64
}

// TypeCount is one type's chunks: a C++ class known by its vtable, or
// "size N" for chunks of N bytes with none.
type TypeCount struct {
	Type                     string
	Vtable                   bool
	Count, Bytes             uint64
	LeakedCount, LeakedBytes uint64
}

// LeakGroup is the leaked chunks of one type.
type LeakGroup struct {
	Type         string
	Count, Bytes uint64
	Roots        uint64 // of Count, referenced by nothing at all
	Examples     []LeakExample
}

// LeakExample is one leaked chunk, with its first bytes.
type LeakExample struct {
	Addr, Size uint64 // the user pointer and the chunk's size
	Preview    []byte
}

// ArenaPin is what keeps an arena's free memory from going back.
type ArenaPin struct {
	Index      int
	Addr       uint64
	Main       bool
	FreeBytes  uint64 // in its bins and fastbins
	TopSize    uint64
	Trimmable  uint64 // what malloc_trim would madvise or give back, resident or not
	Highest    uint64 // the allocated chunk nearest the top in its heap (0: none)
	HighestLen uint64
	HighestTyp string
	FreeBelow  uint64 // free memory below it in that heap, which stays there while it lives
}

// RootCount is one kind of root.
type RootCount struct {
	Kind         string
	Count, Bytes uint64
}
