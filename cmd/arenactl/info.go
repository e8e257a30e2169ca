package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/perfschema"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/schema"
)

func newInfoCmd() *cobra.Command {
	var f injectFlags
	var xml, readOnly, noFreeze bool
	var hold holdFlag
	var cf coreFlags
	var mysqlFlag string
	c := &cobra.Command{
		Use:   "info PID|CORE",
		Short: "Per-arena malloc statistics from glibc's own malloc_info(), plus a memory-map summary",
		Long: `info borrows one thread of the process that is parked in a safe syscall
(or running outside libc with no allocator frame on its stack), makes it run
glibc's malloc_info() into a buffer arenactl maps in the target, reads the
XML, removes everything it created and lets the thread go. No other thread
stops, and nothing is written to the target's own output.`,
		Args: pidOrCoreArg,
		RunE: func(c *cobra.Command, args []string) error {
			if xml && f.json {
				return &usageError{msg: "--xml and --json are mutually exclusive"}
			}
			if (noFreeze || c.Flags().Changed("freeze")) && !readOnly {
				return &usageError{msg: "--no-freeze and --freeze go with --read-only"}
			}
			if noFreeze {
				if c.Flags().Changed("freeze") && hold.h != inspect.HoldNone {
					return &usageError{msg: "--no-freeze contradicts --freeze " + hold.String()}
				}
				hold.h = inspect.HoldNone
			}
			var server *perfschema.Config
			if mysqlFlag != "" {
				if isCoreArg(args[0]) {
					return &usageError{msg: "--mysql reads a running server: it goes with a process id, not a core"}
				}
				var err error
				if server, err = perfschema.Parse(mysqlFlag); err != nil {
					return &usageError{msg: err.Error()}
				}
			}
			var rep *report.Report
			var err error
			// A live process's malloc environment and CPU counts, read
			// while it is held; a core has neither.
			var env diagnose.Env
			o := f.options()
			o.Env = &env
			switch {
			case isCoreArg(args[0]):
				rep, err = inspect.Core(c.Context(), args[0], cf.options(f.debugDirs))
			case readOnly:
				rep, err = inspect.ReadOnly(c.Context(), parsePid(args), o, hold.h)
			default:
				rep, err = inspect.Info(c.Context(), parsePid(args), o)
			}
			if err != nil {
				return err
			}
			if server != nil {
				inspect.AddServerMemory(c.Context(), rep, server, f.timeout)
			}
			findings := diagnose.Diagnose(rep, env)
			switch {
			case xml:
				_, err = os.Stdout.Write(rep.Malloc.Raw)
			case f.json:
				err = writeJSON(os.Stdout, schema.NewInfo(rep, findings))
			default:
				if err = render.Info(os.Stdout, rep); err == nil {
					err = render.Findings(os.Stdout, findings)
				}
			}
			return err
		},
	}
	f.register(c)
	c.Flags().BoolVar(&xml, "xml", false, "print glibc's malloc_info XML verbatim (with --read-only: as glibc would print it)")
	c.Flags().BoolVar(&readOnly, "read-only", false, "run nothing of the program's: read the allocator's state from memory, from a copy-on-write image or with every thread stopped for the walk (see --freeze)")
	c.Flags().BoolVar(&noFreeze, "no-freeze", false, "with --read-only: stop nothing at all; the numbers may be torn by threads that allocate meanwhile (--freeze none)")
	c.Flags().StringVar(&mysqlFlag, "mysql", "", "a MySQL or MariaDB server's socket (as root) or DSN (user:password@unix(/path)/): its performance_schema memory totals beside malloc's, in the RSS waterfall")
	registerFreeze(c.Flags(), &hold, true)
	cf.register(c)
	return c
}
