// Package glibc owns what arenactl knows about glibc's allocator in memory:
// main_arena and mp_ checked against memory (or found there alone, from a
// core without its libc file), every thread's tcache, the read-only walk,
// and what a walk says of an injection's safety (damage, arena locks). Its
// subpackages hold the rest: finding the target's libc (or the static
// executable or libc_malloc_debug.so standing in for it), its version,
// symbols and TLS facts from its file is internal/glibc/libc's; the layouts
// of glibc's structures from 2.17 to 2.43, as data, are
// internal/glibc/layouts'; the malloc_info XML in every format (parsed and
// rendered) is internal/glibc/mallocinfo's; which thread may run allocator
// code and the calls injected into it are internal/glibc/inject's; what a
// finished walk predicts (malloc_trim's gain) is internal/glibc/predict's.
// The per-run report is internal/report's; opening a target's heap once is
// internal/heap's.
//
// The walk reads memory through internal/glibc/memio (a block cache,
// copies of whole heaps, a loader running ahead), which knows nothing of
// glibc's structures.
//
// It never talks to the kernel: it reads a target through the small
// interfaces in target.go, so a live process and a core file look alike.
package glibc
