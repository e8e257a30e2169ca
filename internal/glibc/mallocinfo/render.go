package mallocinfo

import (
	"bytes"
	"fmt"
)

// Format is how one glibc version prints malloc_info: which lines it has
// and how it indents them (layouts.Layout has its version's).
type Format struct {
	MmapLine       bool // <total type="mmap"> (2.20+)
	FastTotals     bool // <total type="fast"> lines (absent on 2.43)
	SizePrefix     string
	UnsortedPrefix string
}

// Render prints mi exactly as glibc's malloc_info(0, fp) of the given
// format prints it, byte for byte: the read-only walker's output can then
// be compared with glibc's own, and users get the format their tools
// already parse.
func Render(mi *Info, l Format) []byte {
	var b bytes.Buffer
	b.WriteString("<malloc version=\"1\">\n")
	for i := range mi.Arenas {
		a := &mi.Arenas[i]
		fmt.Fprintf(&b, "<heap nr=\"%d\">\n<sizes>\n", a.Index)
		for _, s := range a.Sizes {
			fmt.Fprintf(&b, "%s<size from=\"%d\" to=\"%d\" total=\"%d\" count=\"%d\"/>\n", l.SizePrefix, s.From, s.To, s.Total, s.Count)
		}
		if u := a.Unsorted; u != nil {
			fmt.Fprintf(&b, "%s<unsorted from=\"%d\" to=\"%d\" total=\"%d\" count=\"%d\"/>\n", l.UnsortedPrefix, u.From, u.To, u.Total, u.Count)
		}
		b.WriteString("</sizes>\n")
		if l.FastTotals {
			fmt.Fprintf(&b, "<total type=\"fast\" count=\"%d\" size=\"%d\"/>\n", a.FastCount, a.FastBytes)
		}
		fmt.Fprintf(&b, "<total type=\"rest\" count=\"%d\" size=\"%d\"/>\n", a.RestCount, a.RestBytes)
		fmt.Fprintf(&b, "<system type=\"current\" size=\"%d\"/>\n", a.SystemCurrent)
		fmt.Fprintf(&b, "<system type=\"max\" size=\"%d\"/>\n", a.SystemMax)
		fmt.Fprintf(&b, "<aspace type=\"total\" size=\"%d\"/>\n", a.AspaceTotal)
		fmt.Fprintf(&b, "<aspace type=\"mprotect\" size=\"%d\"/>\n", a.AspaceMprotect)
		if a.HasSubheaps {
			fmt.Fprintf(&b, "<aspace type=\"subheaps\" size=\"%d\"/>\n", a.Subheaps)
		}
		b.WriteString("</heap>\n")
	}
	if l.FastTotals {
		fmt.Fprintf(&b, "<total type=\"fast\" count=\"%d\" size=\"%d\"/>\n", mi.FastCount, mi.FastBytes)
	}
	fmt.Fprintf(&b, "<total type=\"rest\" count=\"%d\" size=\"%d\"/>\n", mi.RestCount, mi.RestBytes)
	if l.MmapLine {
		// glibc prints the count with %d from an int.
		fmt.Fprintf(&b, "<total type=\"mmap\" count=\"%d\" size=\"%d\"/>\n", int32(mi.MmapCount), mi.MmapBytes)
	}
	fmt.Fprintf(&b, "<system type=\"current\" size=\"%d\"/>\n", mi.SystemCurrent)
	fmt.Fprintf(&b, "<system type=\"max\" size=\"%d\"/>\n", mi.SystemMax)
	fmt.Fprintf(&b, "<aspace type=\"total\" size=\"%d\"/>\n", mi.AspaceTotal)
	fmt.Fprintf(&b, "<aspace type=\"mprotect\" size=\"%d\"/>\n", mi.AspaceMprotect)
	b.WriteString("</malloc>\n")
	return b.Bytes()
}
