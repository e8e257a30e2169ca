// Package libc owns finding the object that holds a target's glibc
// allocator and what its file says: which allocator a process runs
// (DetectAllocator: glibc, an interposer, musl, a static executable), the
// libc.so.6 among its mappings (FindLibc), a static executable standing in
// for it (FindStaticImage, dated by its version strings or by a fingerprint
// tried against every layout of internal/glibc/layouts), and
// libc_malloc_debug.so's copy (FindMallocDebugImage). Of each it reads the
// load bias, the version banner, the exported symbols, the build-id and
// the detached debug file it names, the static initialisers of main_arena
// and mp_ in .data, and the TLS facts (GOT slots, PT_TLS) from which a
// thread's tcache is found (TLSOffsets).
//
// It reads files, not the target's memory (TLSOffsets reads GOT slots
// through a function its caller passes): internal/glibc, which imports it,
// checks what it finds against memory, finds a libc from a core's memory
// alone, and walks the heap.
package libc
