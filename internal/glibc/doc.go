// Package glibc owns what arenactl knows about glibc's allocator: finding the
// target's libc and its version, the symbols it exports, deciding which
// thread may run allocator code safely, the malloc_info XML in every format
// from 2.17 to 2.43, and the Report model that every renderer reads.
//
// It never talks to the kernel: it reads a target through the small
// interfaces in target.go, so a live process and a core file look alike.
package glibc
