package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/report"
)

type snapshotFlags struct {
	out     string
	full    bool
	zstd    bool
	timeout time.Duration
	json    bool
}

func newSnapshotCmd() *cobra.Command {
	var f snapshotFlags
	c := &cobra.Command{
		Use:   "snapshot PID -o FILE",
		Short: "Write a small ELF core of the process: every thread's registers and the memory the allocator walk reads",
		Long: `snapshot stops every thread of the process, writes an ELF core that gdb and
'arenactl info FILE' open, and lets the threads go. The core holds every
thread's registers, the auxiliary vector, NT_FILE and the whole mapping list,
but only the memory a read-only walk of the allocator needs: the heaps'
resident pages, libc's, ld.so's and the program's writable data, every
thread's TLS, and the pages the walk itself read (mmapped chunks' headers).
PROT_NONE reservations and file text are never written. --full adds the
stacks and all other anonymous memory. FILE ending in .zst, or --zstd,
compresses it after the threads are released.`,
		Args: pidArg,
		RunE: func(c *cobra.Command, args []string) error {
			if f.out == "" {
				return &usageError{msg: "snapshot needs -o FILE (see 'arenactl snapshot --help')"}
			}
			if err := hostfs.CheckOutput(f.out); err != nil {
				return outputErr(err)
			}
			if strings.HasSuffix(f.out, ".zst") {
				f.zstd = true
			}
			rep, err := inspect.Snapshot(c.Context(), parsePid(args), inspect.SnapshotOptions{Out: f.out, Full: f.full, Zstd: f.zstd, Timeout: f.timeout, DebugDirs: glibc.DefaultDebugDirs})
			if err != nil {
				return outputErr(err)
			}
			if n := len(rep.RemovedPartials); n > 0 {
				fmt.Fprintf(os.Stderr, "arenactl: removed %d partial file(s) an interrupted snapshot had left: %s\n", n, strings.Join(rep.RemovedPartials, " "))
			}
			if f.json {
				return writeJSON(os.Stdout, snapshotJSON(rep))
			}
			renderSnapshot(os.Stdout, rep)
			return nil
		},
	}
	c.Flags().StringVarP(&f.out, "output", "o", "", "the core file to write (a regular file there is replaced; anything else is refused)")
	c.Flags().BoolVar(&f.full, "full", false, "also dump the stacks and all other anonymous memory (for gdb backtraces)")
	c.Flags().BoolVar(&f.zstd, "zstd", false, "compress the core with zstd (implied by a FILE ending in .zst)")
	c.Flags().DurationVar(&f.timeout, "timeout", 3*time.Second, "how long to wait for every thread to stop")
	c.Flags().BoolVar(&f.json, "json", false, "print JSON")
	return c
}

func renderSnapshot(w io.Writer, r *report.Snapshot) {
	size := human(uint64(r.Size))
	if r.Compressed {
		size += fmt.Sprintf(" zstd (%s uncompressed)", human(uint64(r.CoreSize)))
	}
	fmt.Fprintf(w, "process %d (%s): core written to %s, %s\n", r.Pid, r.Exe, r.Path, size)
	fmt.Fprintf(w, "%d threads were frozen for %s\n", r.Threads, fmtDur(r.Frozen))
	what := "heaps, libc's and the program's data, TLS, pages the allocator walk read"
	if r.Full {
		what = "all anonymous and written private memory"
	}
	fmt.Fprintf(w, "memory: %s written (%s) from %d of %d mappings, %s more listed as zeros; the process's anonymous RSS is %s\n",
		human(r.Dumped), what, r.DumpedMappings, r.Mappings, human(r.Zeros), human(r.AnonRSS))
	if r.Unreadable > 0 {
		fmt.Fprintf(w, "%s of it could not be read (guard pages) and is left out\n", human(r.Unreadable))
	}
	if r.WalkErr != "" {
		fmt.Fprintf(w, "warning: the allocator walk failed (%s); the core holds the heaps and libc's data but may lack mmapped chunks' headers\n", r.WalkErr)
	}
}

type jsonSnapshot struct {
	Pid            int    `json:"pid"`
	Exe            string `json:"exe"`
	Path           string `json:"path"`
	FileBytes      int64  `json:"file_bytes"`
	CoreBytes      int64  `json:"core_bytes"`
	Compressed     bool   `json:"zstd"`
	Full           bool   `json:"full"`
	FrozenUs       int64  `json:"frozen_us"`
	Threads        int    `json:"threads"`
	DumpedBytes    uint64 `json:"dumped_bytes"`
	ZeroBytes      uint64 `json:"zero_bytes"`
	RecordedBytes  uint64 `json:"walk_pages_bytes"`
	Unreadable     uint64 `json:"unreadable_bytes"`
	Mappings       int    `json:"mappings"`
	DumpedMappings int    `json:"dumped_mappings"`
	Segments       int    `json:"segments"`
	AnonRSS        uint64 `json:"anonymous_rss"`
	WalkError      string `json:"walk_error,omitempty"`
}

func snapshotJSON(r *report.Snapshot) jsonSnapshot {
	return jsonSnapshot{Pid: r.Pid, Exe: r.Exe, Path: r.Path, FileBytes: r.Size, CoreBytes: r.CoreSize, Compressed: r.Compressed,
		Full: r.Full, FrozenUs: r.Frozen.Microseconds(), Threads: r.Threads, DumpedBytes: r.Dumped, ZeroBytes: r.Zeros, RecordedBytes: r.Recorded,
		Unreadable: r.Unreadable, Mappings: r.Mappings, DumpedMappings: r.DumpedMappings, Segments: r.Segments, AnonRSS: r.AnonRSS,
		WalkError: r.WalkErr}
}

// outputErr turns a refused -o into a usage error that says why.
func outputErr(err error) error {
	if hostfs.IsNotRegular(err) {
		return &usageError{msg: fmt.Sprintf("-o %v: snapshot writes a new file or replaces a regular one, nothing else", err)}
	}
	return err
}
