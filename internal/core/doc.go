// Package core reads ELF core files: the kernel's, gcore's and arenactl's
// own snapshots. Target opens one as a target.Target, the same view a live
// process gives (memory, classified mappings, threads with their registers,
// the files it mapped, under a sysroot for another machine's core), so that
// the heap layer never knows which one it reads.
//
// Writer writes arenactl's snapshots: cores with only the memory that
// matters, which gdb opens like any other core. Notes of their own (name
// "ARENACTL") give arenactl the process's exact mapping list (type 1), the
// memory that reads as zeros without being in the file (type 2), and what
// the snapshot knew of the allocator (type 3, NoteAllocator: glibc.Record),
// so that reading it needs no libc file.
//
// The file is mapped for its headers and notes; the dumped memory is read
// with pread(2) (Core.ReadAt), never read whole into memory. Compressed
// cores (zstd, gzip, xz) are first unpacked to an unlinked temporary file, checked from
// their first bytes and bounded (Options). Only regular files are opened.
package core
