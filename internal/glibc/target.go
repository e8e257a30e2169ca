package glibc

import (
	"os"

	"github.com/arenactl/arenactl/internal/maps"
)

// Memory reads the target's address space. A live process and a core file
// both implement it; nothing in this package knows which one it reads.
type Memory interface {
	ReadAt(p []byte, addr uint64) (int, error)
}

// Caller is the capability to run code in a live target: write its memory and
// call a function there with integer arguments, getting back rax. Only the
// injection paths need it; read-only paths take a Memory.
type Caller interface {
	Memory
	WriteAt(p []byte, addr uint64) (int, error)
	Call(fn uint64, args ...uint64) (uint64, error)
}

// FileOpener opens the file that backs a mapping: for a live process through
// /proc/PID/map_files (so targets in containers work), for a core through a
// sysroot. The caller closes the file.
type FileOpener func(m maps.Mapping) (*os.File, error)
