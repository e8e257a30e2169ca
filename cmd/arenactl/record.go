package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/schema"
)

type recordFlags struct {
	out           string
	interval      time.Duration
	duration      time.Duration
	rate          sizeValue
	maxStacks     int
	maxDisk       sizeValue
	triggerRss    sizeValue
	triggerCgroup sizeValue
	triggerHigh   bool
	cooldown      time.Duration
	maxSnapshots  int
	snapPrefix    string
	pprofDir      string
	pprofEvery    time.Duration
	pprofKeep     int
	tiers         string
	walkEvery     time.Duration
	walkMaxStop   time.Duration
	walkBudget    string
}

func newRecordCmd() *cobra.Command {
	var f injectFlags
	rf := recordFlags{rate: sizeValue(sampler.DefaultRate), maxDisk: 64 << 20}
	c := &cobra.Command{
		Use:   "record PID -o FILE",
		Short: "The heap of a running process over time: RSS by memory class, arenas and the sampled live set by stack, to a bounded file",
		Long: `record keeps leaks' sampler in the process (placed without a restart, a few
ns per malloc) and, every --interval, appends to FILE the process's RSS by
memory class (main heap, arena heaps, mmapped chunks, other anonymous
memory, stacks, files), each arena's system and top bytes, and the bytes
allocated since the recording began and still held, by allocation stack;
every --walk-every, malloc's held, free-resident and trimmable bytes from a
read-only walk, skipped when its stop would pass --walk-max-stop.
Older intervals merge into coarser ones, so the file and arenactl's memory
stay bounded over days. Ctrl-C, SIGTERM, --duration or the process's exit
end it cleanly; a killed arenactl leaves every interval written so far.
--trigger-* write a snapshot (a core) when a threshold is crossed;
--pprof-dir writes pprof profiles of what is held. 'arenactl record show
FILE' prints a recording.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 1 && isCoreArg(args[0]) {
				if fi, err := os.Stat(args[0]); err == nil && !fi.IsDir() {
					return &usageError{msg: "record records a running process; 'arenactl record show FILE' prints a recording"}
				}
			}
			return pidArg(c, args)
		},
		RunE: func(c *cobra.Command, args []string) error {
			if rf.out == "" {
				return &usageError{msg: "-o FILE is needed: the recording is written there"}
			}
			if err := checkRecordOut(rf.out); err != nil {
				return err
			}
			if rf.pprofDir != "" {
				if fi, err := os.Stat(rf.pprofDir); err != nil || !fi.IsDir() {
					return &usageError{msg: fmt.Sprintf("--pprof-dir %s: not a directory", rf.pprofDir)}
				}
			}
			tiers, err := record.ParseTiers(rf.tiers)
			if err != nil {
				return &usageError{msg: "--tiers: " + err.Error()}
			}
			prefix := rf.snapPrefix
			if prefix == "" {
				prefix = strings.TrimSuffix(rf.out, filepath.Ext(rf.out)) + "-snapshot"
			}
			o := inspect.RecordOptions{Options: f.options(), Out: rf.out, Interval: rf.interval, Duration: rf.duration, Rate: uint64(rf.rate),
				MaxStacks: rf.maxStacks, MaxDisk: int64(rf.maxDisk), TriggerRss: uint64(rf.triggerRss), TriggerCgroup: uint64(rf.triggerCgroup),
				TriggerHigh: rf.triggerHigh, Cooldown: rf.cooldown, MaxSnapshots: rf.maxSnapshots, SnapshotPrefix: prefix,
				PprofDir: rf.pprofDir, PprofEvery: rf.pprofEvery, PprofKeep: rf.pprofKeep, Tiers: tiers,
				WalkEvery: rf.walkEvery, WalkMaxStop: rf.walkMaxStop}
			if rf.walkBudget != "" {
				stop, cpu, ok := strings.Cut(rf.walkBudget, ",")
				var e1, e2 error
				o.WalkStopShare, e1 = strconv.ParseFloat(stop, 64)
				o.WalkCPUShare, e2 = strconv.ParseFloat(cpu, 64)
				if !ok || e1 != nil || e2 != nil || !(o.WalkStopShare > 0 && o.WalkStopShare <= 1) || !(o.WalkCPUShare > 0 && o.WalkCPUShare <= 1) {
					return &usageError{msg: "--walk-budget is STOP_SHARE,CPU_SHARE, each in (0, 1]"}
				}
			}
			out, err := inspect.Record(c.Context(), parsePid(args), o)
			if out == nil {
				return recordOutErr(rf.out, err)
			}
			rec := out.Recording
			if rec.End != nil {
				if l := rec.End.Left; l.Addr != 0 {
					fmt.Fprintf(os.Stderr, "arenactl: the sampler's %d bytes at %#x stay in the process, inert: %s\n", l.Size, l.Addr, l.Why)
				}
			}
			if f.json {
				if werr := writeJSON(os.Stdout, schema.NewRecording(rec)); werr != nil && err == nil {
					err = werr
				}
			} else {
				fmt.Fprintf(os.Stdout, "%s: %d intervals kept over %s, %s on disk (%d compactions)",
					rf.out, len(rec.Intervals), render.Duration(rec.Span()), render.Human(uint64(out.FileBytes)), out.Compactions)
				if rec.End != nil {
					fmt.Fprintf(os.Stdout, "; ended: %s", rec.End.Why)
				}
				fmt.Fprintln(os.Stdout)
				if len(out.Pprof) > 0 {
					fmt.Fprintf(os.Stdout, "%d pprof profiles in %s\n", len(out.Pprof), rf.pprofDir)
				}
			}
			return err
		},
		Annotations: map[string]string{endsByInterrupt: "true"},
	}
	f.registerProfile(c)
	fl := c.Flags()
	fl.StringVarP(&rf.out, "output", "o", "", "the recording's file: a new path (an existing file is never replaced), created 0600")
	fl.DurationVar(&rf.interval, "interval", time.Second, "the finest interval; older ones merge into coarser (docs/commands/record.md)")
	fl.DurationVar(&rf.duration, "duration", 0, "how long to record; 0: until interrupted (Ctrl-C, SIGTERM) or the process exits")
	fl.Var(&rf.rate, "rate", "the sampler's mean number of bytes allocated between two samples (suffixes K, M, G)")
	fl.IntVar(&rf.maxStacks, "max-stacks", 100, "how many stacks each interval names; the rest are summed as other")
	fl.Var(&rf.maxDisk, "max-disk", "compact the file (rewrite it, merged) when it reaches this size, unless the merged recording alone is larger")
	fl.Var(&rf.triggerRss, "trigger-rss", "write a snapshot when the process's RSS reaches this size")
	fl.Var(&rf.triggerCgroup, "trigger-cgroup", "write a snapshot when the memory charged to the process's cgroup (v2 memory.current, v1 memory.usage_in_bytes) reaches this size")
	fl.BoolVar(&rf.triggerHigh, "trigger-high", false, "write a snapshot when the process's cgroup (v2) counts a new memory.high event")
	fl.DurationVar(&rf.cooldown, "cooldown", 10*time.Minute, "the least time between two triggered snapshots")
	fl.IntVar(&rf.maxSnapshots, "max-snapshots", 3, "the most snapshots triggers write in a recording")
	fl.StringVar(&rf.snapPrefix, "snapshot-prefix", "", "triggered snapshots are written to PREFIX-N.core.zst (default: FILE without its extension, -snapshot)")
	fl.StringVar(&rf.pprofDir, "pprof-dir", "", "write a gzipped pprof profile of what is held (allocated since the recording began and still held) to this directory every --pprof-every")
	fl.DurationVar(&rf.pprofEvery, "pprof-every", time.Minute, "how often --pprof-dir gets a profile")
	fl.IntVar(&rf.pprofKeep, "pprof-keep", 100, "the most profiles kept in --pprof-dir (the oldest are removed); 0: all")
	fl.DurationVar(&rf.walkEvery, "walk-every", inspect.DefaultWalkEvery, "how often to walk the heaps (over a copy-on-write image) for malloc's held, free and trimmable bytes, the first walk one such period in; 0: never; stretched when a walk costs much (docs/commands/record.md)")
	fl.DurationVar(&rf.walkMaxStop, "walk-max-stop", inspect.DefaultWalkMaxStop, "skip a walk whose image would stop the process longer than this (it grows about 16.5 ms per GiB of heap)")
	fl.StringVar(&rf.walkBudget, "walk-budget", "", "STOP_SHARE,CPU_SHARE: the share of the time the walks may stop the process and of a CPU they may take before the cadence stretches (default 0.001,0.02; the tests' fast walks)")
	fl.MarkHidden("walk-budget")
	fl.StringVar(&rf.tiers, "tiers", "", "how intervals merge as they age: STEP:SPAN,...,STEP*MAX (the tests' short recordings)")
	fl.MarkHidden("tiers")
	c.AddCommand(newRecordShowCmd(), newPageCmd(), newRecordPprofCmd())
	return c
}

// checkRecordOut refuses an -o that is there already or in no directory,
// before anything is done to the process.
func checkRecordOut(path string) error {
	if _, err := os.Lstat(path); err == nil {
		return &usageError{msg: fmt.Sprintf("-o %s: the file is there already; record writes a new file and never replaces one", path)}
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &usageError{msg: fmt.Sprintf("-o %s: there is no directory %s", path, dir)}
	case err == nil && !fi.IsDir(), errors.Is(err, syscall.ENOTDIR):
		return &usageError{msg: fmt.Sprintf("-o %s: %s is not a directory", path, dir)}
	}
	return nil
}

// recordOutErr says why the recording's file could not be made.
func recordOutErr(path string, err error) error {
	var oe *inspect.OutputError
	if errors.As(err, &oe) {
		switch {
		case errors.Is(err, fs.ErrExist), hostfs.IsNotRegular(err):
			return &usageError{msg: fmt.Sprintf("-o %s: the path is taken; record writes a new file and never replaces one", path)}
		case errors.Is(err, syscall.ELOOP):
			return &usageError{msg: fmt.Sprintf("-o %s: a symbolic link; record writes a new file and never follows one", path)}
		}
	}
	return err
}

func newRecordShowCmd() *cobra.Command {
	var asJSON bool
	var top int
	c := &cobra.Command{
		Use:   "show FILE",
		Short: "Print a recording: its RSS by class over time, the stacks holding the most, its events",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			rec, info, err := record.Read(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(os.Stdout, schema.NewRecording(rec))
			}
			return render.Recording(os.Stdout, rec, render.RecordingInfo{Cut: info.Cut, Bytes: info.Bytes, Top: top})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (the schema: docs/json.md)")
	c.Flags().IntVar(&top, "top", render.DefaultLeaksTop, "how many stacks the table shows (0: all)")
	return c
}
