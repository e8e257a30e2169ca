// Package site owns the machine code arenactl places in a target as its
// call site's code page, per architecture: assembly sources (site_ARCH.S)
// built by gen.sh into committed flat images (ARCH.bin), the way
// internal/sampler's image is, with the layout they share (site.h, as Go
// constants in layout.go). What the routines do, and why, is
// internal/ptrace's to say; this package only holds their bytes and where
// each routine begins.
//
// The images are position-independent: every address they use is of the
// code page itself or of the site's other pages, at fixed distances, so
// they are copied into the site as they are.
package site

//go:generate sh gen.sh .

// Code is one architecture's code page. Offsets are from Text's start,
// which is the entry every injected call returns into.
type Code struct {
	Arch string // GOARCH
	Text []byte
	// Restore is where the routine puts the thread's own registers back
	// (after the gate's wait); Image the copy-on-write image routine; Raw
	// the raw syscall routine; Lock the lock routine, LockWait just after
	// its futex wait for the lock, LockEnd its end.
	Restore, Image, Raw, Lock, LockWait, LockEnd uint64
}
