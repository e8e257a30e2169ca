package stackprof

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"
)

// WriteFolded writes the profile in FlameGraph's folded format, which
// flamegraph.pl, inferno and speedscope read: a line per call stack, its
// frames' names from the root, joined by ';', then a space and the
// estimated bytes the stack allocated in the window and still held. Sites
// holding nothing are left out; stacks whose names coincide (they
// differed in lines only) are one line. Lines are sorted, as
// stackcollapse's output is.
func WriteFolded(w io.Writer, p *Profile) error {
	sums := map[string]int64{}
	for i := range p.Sites {
		s := &p.Sites[i]
		v := round(s.Est.InUseBytes)
		if v <= 0 {
			continue
		}
		names := make([]string, len(s.Frames))
		for k, f := range s.Frames {
			names[k] = foldedName(f.Name())
		}
		sums[strings.Join(names, ";")] += v
	}
	return WriteFoldedSums(w, sums)
}

// WriteFoldedSums writes folded lines, each stack (names already made safe
// by FoldedName and joined by ';') and its value, sorted as
// stackcollapse's output is.
func WriteFoldedSums(w io.Writer, sums map[string]int64) error {
	stacks := make([]string, 0, len(sums))
	for k := range sums {
		stacks = append(stacks, k)
	}
	sort.Strings(stacks)
	bw := bufio.NewWriter(w)
	for _, k := range stacks {
		bw.WriteString(k)
		bw.WriteByte(' ')
		bw.WriteString(strconv.FormatInt(sums[k], 10))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// foldedName keeps a name from breaking the line's syntax: ';' separates
// frames and a line ends the stack (spaces are fine: the count is after
// the last one).
var foldedReplacer = strings.NewReplacer(";", ":", "\n", " ", "\r", " ")

func foldedName(s string) string { return foldedReplacer.Replace(s) }

// FoldedName is a name made safe for a folded line.
func FoldedName(s string) string { return foldedName(s) }
