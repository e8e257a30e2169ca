// Package core reads ELF core files: the kernel's, gcore's and arenactl's
// own snapshots. It gives the same things a live process gives the rest of
// arenactl (memory, mappings, threads with their registers), so that the
// glibc walker and the report code never know which one they read.
//
// Writer writes arenactl's snapshots: cores with only the memory that
// matters, which gdb opens like any other core. Two notes of their own give
// arenactl the process's exact mapping list and the memory that reads as
// zeros without being in the file.
//
// The file is mapped, never read whole into memory; compressed cores (zstd,
// gzip, xz) are first unpacked to a temporary file.
package core
