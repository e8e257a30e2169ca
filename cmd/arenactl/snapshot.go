package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/schema"
)

type snapshotFlags struct {
	out     string
	full    bool
	zstd    bool
	timeout time.Duration
	json    bool
	hold    holdFlag
}

func newSnapshotCmd() *cobra.Command {
	var f snapshotFlags
	c := &cobra.Command{
		Use:   "snapshot PID -o FILE",
		Short: "Write a small ELF core of the process: every thread's registers and the memory the allocator walk reads",
		Long: `snapshot stops every thread of the process for as long as it takes to make
a copy-on-write image of it (--freeze), lets the threads go, and writes from
the image an ELF core that gdb and 'arenactl info FILE' open. The core holds every
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
				return outputErr(&inspect.OutputError{Path: f.out, Err: err})
			}
			if f.hold.h == inspect.HoldNone {
				return &usageError{msg: "a snapshot is never torn: --freeze is auto, image or walk"}
			}
			if strings.HasSuffix(f.out, ".zst") {
				f.zstd = true
			}
			rep, err := inspect.Snapshot(c.Context(), parsePid(args), inspect.SnapshotOptions{Out: f.out, Full: f.full, Zstd: f.zstd, Timeout: f.timeout, Hold: f.hold.h, DebugDirs: libc.DefaultDebugDirs, MaxMemory: maxMemory, Jobs: jobs()})
			if err != nil {
				return outputErr(err)
			}
			if n := len(rep.RemovedPartials); n > 0 {
				fmt.Fprintf(os.Stderr, "arenactl: removed %d partial file(s) an interrupted snapshot had left: %s\n", n, strings.Join(rep.RemovedPartials, " "))
			}
			if f.json {
				return writeJSON(os.Stdout, schema.NewSnapshot(rep))
			}
			render.Snapshot(os.Stdout, rep)
			return nil
		},
	}
	c.Flags().StringVarP(&f.out, "output", "o", "", "the core file to write (a regular file there is replaced; anything else is refused)")
	c.Flags().BoolVar(&f.full, "full", false, "also dump the stacks and all other anonymous memory (for gdb backtraces)")
	c.Flags().BoolVar(&f.zstd, "zstd", false, "compress the core with zstd (implied by a FILE ending in .zst)")
	c.Flags().DurationVar(&f.timeout, "timeout", 3*time.Second, "how long to wait for every thread to stop")
	c.Flags().BoolVar(&f.json, "json", false, "print JSON")
	registerFreeze(c.Flags(), &f.hold, false)
	return c
}

// outputErr turns a refused -o into an error that says why, naming the
// path given (never the partial file's): exit 2 for a path that can never
// be written (not a regular file, no such directory, not a directory), 4
// for permission (isFilePermission).
func outputErr(err error) error {
	var oe *inspect.OutputError
	var pe *fs.PathError
	var nr *hostfs.NotRegularError
	switch {
	case errors.As(err, &nr):
		return &usageError{msg: fmt.Sprintf("-o %v: snapshot writes a new file or replaces a regular one, nothing else", nr)}
	case !errors.As(err, &oe):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return &usageError{msg: fmt.Sprintf("-o %s: there is no directory %s", oe.Path, filepath.Dir(oe.Path))}
	case errors.Is(err, syscall.ENOTDIR):
		return &usageError{msg: fmt.Sprintf("-o %s: %s is not a directory", oe.Path, filepath.Dir(oe.Path))}
	case errors.As(err, &pe):
		return &fs.PathError{Op: "-o", Path: oe.Path, Err: pe.Err}
	}
	return err
}
