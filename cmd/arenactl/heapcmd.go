package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/schema"
)

func newHeapCmd() *cobra.Command {
	var cf coreFlags
	var timeout time.Duration
	var debugDirs []string
	var top int
	var addrs []string
	var asJSON, folded bool
	// The scan takes seconds on a large heap: a process is never stopped
	// that long unless asked (--freeze walk, or auto, which may fall back
	// to it).
	hold := holdFlag{h: inspect.HoldImage}
	c := &cobra.Command{
		Use:   "heap PID|CORE",
		Short: "What the heap holds: chunks by type, reachable or leaked, and what pins free memory",
		Long: `heap indexes every allocated chunk of every arena and every mmapped chunk,
scans conservatively from the roots (the writable data and bss of every
loaded object, static TLS, anonymous memory malloc does not own, every
thread's stack from its stack pointer up and its registers), and says of
each chunk whether the program can still reach it, from static data or
only from stacks and registers, or whether it is leaked: referenced by
nothing, or only by other leaked chunks. A pointer into a chunk's middle
counts as a reference to it.

Chunks whose first word points into a C++ vtable are counted under their
class; the others under their chunk size. For each arena it says what
malloc_trim could give back, and which live chunk, highest in the top's
heap, keeps the free memory below it from going back.

On a live process the scan reads a copy-on-write image (the process is
stopped only while the image is made, then runs on). Where none can be made
safely it refuses (exit 14) unless --freeze walk (or auto) lets it stop the
process for the whole scan, seconds on a large heap. Nothing of the
program's is run. On a
core or snapshot it reads the file; a default snapshot does not keep every
root (see docs/commands/heap.md).`,
		Args: pidOrCoreArg,
		RunE: func(c *cobra.Command, args []string) error {
			if top < 1 {
				return &usageError{msg: fmt.Sprintf("--top %d: give 1 or more", top)}
			}
			if folded && asJSON {
				return &usageError{msg: "--folded and --json are mutually exclusive"}
			}
			if hold.h == inspect.HoldNone {
				return &usageError{msg: "a scan of a heap that changes under it means nothing: --freeze is image, walk or auto"}
			}
			var at []uint64
			for _, a := range addrs {
				v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(a), "0x"), 16, 64)
				if err != nil {
					return &usageError{msg: fmt.Sprintf("--addr %q: give an address in hex", a)}
				}
				at = append(at, v)
			}
			var r *report.Contents
			var err error
			if isCoreArg(args[0]) {
				r, err = inspect.CoreContents(c.Context(), args[0], cf.options(debugDirs), at)
			} else {
				r, err = inspect.Contents(c.Context(), parsePid(args), inspect.Options{Timeout: timeout, DebugDirs: debugDirs, MaxMemory: maxMemory, Jobs: jobs(),
					Note: func(s string) { fmt.Fprintln(os.Stderr, "arenactl: "+s) }}, hold.h, at)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(os.Stdout, schema.NewHeap(r))
			}
			if folded {
				return render.ContentsFolded(os.Stdout, r)
			}
			return render.Contents(os.Stdout, r, top)
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for every thread to stop while the image is made")
	c.Flags().IntVar(&top, "top", 20, "how many types to list")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (the schema: docs/json.md): every type, not only --top")
	c.Flags().BoolVar(&folded, "folded", false, "print FlameGraph's folded stacks instead of the table: reachable or leaked, then the type, then its bytes; every type")
	c.Flags().StringArrayVar(&addrs, "addr", nil, "say what holds this address (hex): the allocated chunk, its type and whether it is reachable; repeat for several")
	c.Flags().StringArrayVar(&debugDirs, "debug-dir", libc.DefaultDebugDirs, "a directory of detached debug files (DIR/.build-id/xx/rest.debug), for main_arena, mp_ and vtable symbols; repeat for several")
	registerFreeze(c.Flags(), &hold, false)
	cf.register(c)
	return c
}
