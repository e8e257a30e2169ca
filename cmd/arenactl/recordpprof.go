package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

func newRecordPprofCmd() *cobra.Command {
	var out, from, to string
	c := &cobra.Command{
		Use:   "pprof FILE -o OUT.pb.gz [--from T1] [--to T2]",
		Short: "Write a recording's profile of what is held at a time, or of what a time range added, as a pprof file",
		Long: `pprof writes a gzipped pprof profile from a recording: what was allocated
since the recording began and is still held at --to (default: its end), by
stack; with --from, what each stack held at --to beyond what it held at
--from (what 'go tool pprof -diff_base' of the two times' profiles shows).
A time is an offset from the recording's start (90s, 1h2m) or an RFC 3339
time; it stands for the last interval kept that ends at or before it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if out == "" {
				return &usageError{msg: "-o OUT.pb.gz is needed: the profile is written there"}
			}
			rec, _, err := record.Read(args[0])
			if err != nil {
				return err
			}
			toI := len(rec.Intervals) - 1
			if to != "" {
				if toI, err = recordingTime(rec, "--to", to); err != nil {
					return err
				}
			} else if toI < 0 {
				return &usageError{msg: args[0] + ": the recording holds no interval"}
			}
			fromI := -1
			if from != "" {
				if fromI, err = recordingTime(rec, "--from", from); err != nil {
					return err
				}
				if fromI >= toI {
					return &usageError{msg: fmt.Sprintf("--from %s and --to %s name intervals ending at %s and %s: --from must come an interval before --to",
						from, to, rec.Intervals[fromI].End().Format(time.RFC3339Nano), rec.Intervals[toI].End().Format(time.RFC3339Nano))}
				}
			}
			p := record.HeldProfile(rec, fromI, toI)
			po, err := openProfileOutputs("record pprof", out, "")
			if err != nil {
				return err
			}
			defer po.close()
			return po.print(func(w io.Writer) error { return stackprof.WritePprof(w, p) }, func(w io.Writer) error {
				what := "held at " + rec.Intervals[toI].End().Format(time.RFC3339Nano)
				if fromI >= 0 {
					what = "added from " + rec.Intervals[fromI].End().Format(time.RFC3339Nano) + " to " + rec.Intervals[toI].End().Format(time.RFC3339Nano)
				}
				_, err := fmt.Fprintf(w, "%d stacks, what was %s\n", len(p.Sites), what)
				return err
			}, true)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&out, "output", "o", "", "the pprof file to write (gzipped profile.proto)")
	fl.StringVar(&from, "from", "", "the range's start: an offset from the recording's start (90s) or an RFC 3339 time")
	fl.StringVar(&to, "to", "", "the time the profile is of, or the range's end (default: the recording's end)")
	return c
}

// recordingTime is the interval a --from or --to names.
func recordingTime(rec *report.Recording, flag, v string) (int, error) {
	var at time.Time
	if d, err := time.ParseDuration(v); err == nil {
		at = rec.Meta.Start.Add(d)
	} else if at, err = time.Parse(time.RFC3339Nano, v); err != nil {
		return 0, &usageError{msg: fmt.Sprintf("%s %q: neither an offset from the recording's start (90s) nor an RFC 3339 time", flag, v)}
	}
	i, err := record.IntervalAt(rec, at)
	if err != nil {
		return 0, &usageError{msg: fmt.Sprintf("%s %s: %v", flag, v, err)}
	}
	return i, nil
}
