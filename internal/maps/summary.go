package maps

import "sort"

// ClassSummary totals the mappings of one Class (byte counts; the smaps
// counters are zero unless the mappings came from smaps).
type ClassSummary struct {
	Class        Class
	Count        int
	Size         uint64
	Rss, Pss     uint64
	PrivateDirty uint64
	Swap         uint64
}

// Summarize totals ms by Class, one row per class present, in Class order.
// Classify ms first, or everything lands in ClassAnon.
func Summarize(ms []Mapping) []ClassSummary {
	var rows []ClassSummary
	at := make(map[Class]int) // row index of each class seen
	for _, m := range ms {
		i, ok := at[m.Class]
		if !ok {
			i = len(rows)
			at[m.Class] = i
			rows = append(rows, ClassSummary{Class: m.Class})
		}
		s := &rows[i]
		s.Count++
		s.Size += m.Size()
		s.Rss += m.Rss
		s.Pss += m.Pss
		s.PrivateDirty += m.PrivateDirty
		s.Swap += m.Swap
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Class < rows[j].Class })
	return rows
}
