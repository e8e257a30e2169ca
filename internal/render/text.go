// Package render prints the report model for people: the tables and lines
// of every command's text output. The JSON documents are package schema's.
package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

// Text is a string a target or a core chose (a path, a command name, a
// mapping's name, a note), made safe to print. Local users are hostile: an
// executable named with an escape sequence or a newline would rewrite the
// terminal or forge lines of arenactl's output. A string holding a control
// or format character (bidirectional overrides among them) or bytes that
// are not UTF-8 is printed Go-quoted ("/tmp/a\x1b[2Jb\n"); any other is
// printed as it is.
func Text(s string) string {
	if clean(s) {
		return s
	}
	return strconv.Quote(s)
}

// Line is a whole message (an error, which may quote a target's path)
// made safe to print on one line: every control or format character and
// every byte that is not UTF-8 is written as its Go escape (\n, \x1b,
// \u202e), the rest as it is.
func Line(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unsafeRune(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func clean(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return false
			}
		}
		if unsafeRune(r) {
			return false
		}
	}
	return true
}

// unsafeRune: what a terminal may act on rather than show.
func unsafeRune(r rune) bool {
	return r != ' ' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029')
}
