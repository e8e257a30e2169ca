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

// FileOpener opens the file that backs a mapping: for a live process through
// /proc/PID/map_files (so targets in containers work), for a core through a
// sysroot. The caller closes the file.
type FileOpener func(m maps.Mapping) (*os.File, error)
