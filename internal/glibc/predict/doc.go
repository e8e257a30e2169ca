// Package predict owns what arenactl predicts from a walk of the heap
// (internal/glibc) before anything of the target's runs: what
// malloc_trim(pad) would give back, and how much of it is resident now.
// The residency comes from the caller (a live process's page map), so the
// package reads no /proc and does no I/O of its own.
package predict
