package glibc

// Memory reads the target's address space. A live process and a core file
// both implement it; nothing in this package knows which one it reads.
type Memory interface {
	ReadAt(p []byte, addr uint64) (int, error)
}
