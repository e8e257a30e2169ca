package inject

import "github.com/arenactl/arenactl/internal/glibc"

// Caller is the capability to run code in a live target: write its memory and
// call a function there with integer arguments, getting back rax. Only the
// injection paths need it; read-only paths take a Memory.
type Caller interface {
	glibc.Memory
	WriteAt(p []byte, addr uint64) (int, error)
	Call(fn uint64, args ...uint64) (uint64, error)
}
