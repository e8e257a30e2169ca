package main

import (
	"errors"

	"github.com/arenactl/arenactl/internal/heap"
)

// hint is what the user can do about err, added to its one line; the
// packages below describe conditions and leave this to the command line.
func hint(err error) string {
	var memOnly *heap.MemoryOnlyError
	switch {
	case errors.As(err, &memOnly):
		return " (no libc file to read it with: give the matching one with --libc, or the machine's files with --sysroot)"
	}
	return ""
}
