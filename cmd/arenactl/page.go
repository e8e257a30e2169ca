package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/render/page"
)

func newPageCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "page RECORDING -o FILE.html",
		Short: "Write one self-contained HTML page of a recording: memory by class over time, held bytes by stack, flame graphs, findings",
		Long: `page reads a recording that arenactl record wrote (up to its last whole
frame, if arenactl was killed while writing it) and writes one HTML file that
works offline and can be attached to a ticket: RSS stacked by memory class over
time, the top stacks' held bytes over time, a flame graph of what a selected
range allocated and still holds at its end, a differential flame graph between
two times, and the findings where they first held. Nothing is run or read
but the recording.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{msg: "record page takes one recording file (see 'arenactl record page --help')"}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if out == "" {
				return &usageError{msg: "record page needs -o FILE.html (see 'arenactl record page --help')"}
			}
			rec, info, err := record.Read(args[0])
			if err != nil {
				return err
			}
			if out == "-" {
				w := bufio.NewWriter(os.Stdout)
				if err := page.Write(w, rec); err != nil {
					return err
				}
				return w.Flush()
			}
			f, err := hostfs.CreateOutput(out)
			if err != nil {
				return outputErr(&inspect.OutputError{Path: out, Err: err})
			}
			defer f.Discard()
			w := bufio.NewWriter(f)
			if err := page.Write(w, rec); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
			st, err := f.Stat()
			if err != nil {
				return err
			}
			if err := f.Commit(); err != nil {
				return err
			}
			fmt.Printf("wrote %s (%s): %s, %s\n", render.Text(out), render.Human(uint64(st.Size())),
				render.Plural(len(rec.Intervals), "1 interval", "%d intervals"), render.Plural(len(rec.Stacks), "1 stack", "%d stacks"))
			if info.Cut {
				fmt.Println("the recording ends inside a frame (arenactl was stopped while writing it): read up to its last whole frame")
			}
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "the HTML file to write (a new file or a regular one, replaced); - for standard output")
	return c
}
