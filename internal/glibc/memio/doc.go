// Package memio owns how the walker reads a target's memory: a cache of
// aligned blocks, copies of an arena's heaps made whole (windows) in a
// buffer outside the Go heap, a loader that copies the next arena's heaps
// while the walker walks the current one, and sets of chunk addresses kept
// as bitmaps per region of address space. It knows nothing of glibc's
// structures: which ranges to copy, and what to prepare from a copy, are
// the walker's (internal/glibc).
package memio
