// Package detach holds what taking arenactl's heap sampler out of a process
// left there (Left): internal/sampler's Detach returns it and the report
// model (internal/report) carries it. It is its own package, below both,
// so that the model does not pull in the live code that attaches.
package detach

// Left says what Detach left in the process.
type Left struct {
	Addr, Size uint64 // the sampler's memory, if kept (0: removed)
	Why        string
	Restored   int      // GOT entries put back
	Changed    []string // GOT entries something else rewrote meanwhile: left as they are
	Unloaded   []string // GOT entries of objects unloaded meanwhile (dlclose): gone with them
}
