// Package render prints the report model for people: the tables and lines
// of every command's text output. The JSON documents are package schema's.
package render

import (
	"fmt"
	"io"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

func newTable(w io.Writer, header ...any) *tablewriter.Table {
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(tw.AlignRight),
		tablewriter.WithHeaderAlignment(tw.AlignRight),
		tablewriter.WithFooterAlignmentConfig(tw.CellAlignment{Global: tw.AlignRight}),
	)
	t.Header(header...)
	return t
}

// Human prints a byte count the way people read RSS: 1024-based units.
func Human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

func signedHuman(n int64) string {
	if n < 0 {
		return "-" + Human(uint64(-n))
	}
	return Human(uint64(n))
}

func Duration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
	return d.Round(time.Millisecond).String()
}

// Plural picks the singular or plural wording for n things.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf(many, n)
}
