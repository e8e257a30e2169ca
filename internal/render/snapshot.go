package render

import (
	"fmt"
	"io"

	"github.com/arenactl/arenactl/internal/report"
)

// Snapshot says what snapshot wrote.
func Snapshot(w io.Writer, r *report.Snapshot) {
	size := Human(uint64(r.Size))
	if r.Compressed {
		size += fmt.Sprintf(" zstd (%s uncompressed)", Human(uint64(r.CoreSize)))
	}
	fmt.Fprintf(w, "process %d (%s): core written to %s, %s\n", r.Pid, Text(r.Exe), Text(r.Path), size)
	switch r.Hold {
	case "image":
		fmt.Fprintf(w, "%s stopped for %s while a copy-on-write image was made (raw clone syscalls in one thread, no code of the program's); the core was written from the image while the process ran\n", Plural(r.Threads, "its thread was", "its %d threads were"), Duration(r.Frozen))
		if r.LeftOut > 0 {
			fmt.Fprintf(w, "the image left out %s of %s the allocator does not own (listed in the core, not dumped; their page tables were not copied)\n", Plural(r.LeftOut, "one mapping", "%d mappings"), Human(r.LeftOutBytes))
		}
	default:
		fmt.Fprintf(w, "%d threads were frozen for %s\n", r.Threads, Duration(r.Frozen))
		if r.ImageSkipped != "" {
			fmt.Fprintf(w, "(no copy-on-write image, which would have stopped them only while one was made: %s)\n", r.ImageSkipped)
		}
	}
	what := "heaps, libc's and the program's data, TLS, pages the allocator walk read"
	if r.Full {
		what = "all anonymous and written private memory"
	}
	fmt.Fprintf(w, "memory: %s written (%s) from %d of %d mappings, %s more listed as zeros; the process's anonymous RSS is %s\n",
		Human(r.Dumped), what, r.DumpedMappings, r.Mappings, Human(r.Zeros), Human(r.AnonRSS))
	if r.Unreadable > 0 {
		fmt.Fprintf(w, "%s of it could not be read (guard pages) and is left out\n", Human(r.Unreadable))
	}
	if r.WalkErr != "" {
		fmt.Fprintf(w, "warning: the allocator walk failed (%s); the core holds the heaps and libc's data but may lack mmapped chunks' headers\n", r.WalkErr)
	}
}
