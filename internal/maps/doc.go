// Package maps parses /proc/PID/maps, smaps and smaps_rollup and classifies
// every mapping (main heap, arena heaps, stacks, executable, libraries, ...).
// It works on text, so the same code serves a live /proc and a core file's
// mapping list. It is the one parser of those files: internal/ptrace reads
// a process's mappings through it too, so it imports nothing of arenactl's
// but internal/procfs. Being that low, it also holds the address range
// (Range) every layer above passes around.
package maps
