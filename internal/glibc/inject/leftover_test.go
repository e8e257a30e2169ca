package inject

import (
	"encoding/binary"
	"testing"
)

func journalBytes(j journal) []byte {
	b := make([]byte, 512)
	for i, v := range []uint64{j.hold, j.state, j.seq, j.buf, j.size, j.fp} {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return b
}

// What a later run removes of a site, from the journal and the site's call
// counters: never a step that may have been done, never a FILE that may
// still be in use.
func TestPlanLeftover(t *testing.T) {
	const buf, size, fp = 0x7f0000000000, 4 << 20, 0x5500001000
	cases := []struct {
		name                  string
		j                     journal
		pending, done, result uint64
		wantFP, wantBuf       uint64
		keep, unmarked        bool
	}{
		{"nothing held", journal{}, 3, 3, 0, 0, 0, false, false},
		{"mmap returned, not yet recorded", journal{1, jMmap, 2, 0, size, 0}, 2, 2, buf, 0, buf, false, true},
		{"mmap never started", journal{1, jMmap, 2, 0, size, 0}, 1, 1, 0x1234, 0, 0, false, false},
		{"mmap failed", journal{1, jMmap, 2, 0, size, 0}, 2, 2, ^uint64(11), 0, 0, false, false},
		{"mapped", journal{1, jMapped, 2, buf, size, 0}, 2, 2, buf, 0, buf, false, false},
		{"fmemopen returned", journal{1, jFmemopen, 3, buf, size, 0}, 3, 3, fp, fp, buf, false, false},
		{"fmemopen returned NULL", journal{1, jFmemopen, 3, buf, size, 0}, 3, 3, 0, 0, buf, false, false},
		{"fmemopen abandoned", journal{1, jFmemopen, 3, buf, size, 0}, 3, 2, 0, 0, buf, true, false},
		{"fmemopen never started", journal{1, jFmemopen, 3, buf, size, 0}, 2, 2, buf, 0, buf, false, false},
		{"FILE open", journal{1, jOpen, 3, buf, size, fp}, 5, 5, 0, fp, buf, false, false},
		{"fclose never started", journal{1, jFclose, 6, buf, size, fp}, 5, 5, 0, fp, buf, false, false},
		{"fclose returned", journal{1, jFclose, 6, buf, size, fp}, 6, 6, 0, 0, buf, false, false},
		{"fclose abandoned", journal{1, jFclose, 6, buf, size, fp}, 6, 5, 0, 0, buf, true, false},
		{"munmap never started", journal{1, jMunmap, 7, buf, size, 0}, 6, 6, 0, 0, buf, false, false},
		{"munmap returned", journal{1, jMunmap, 7, buf, size, 0}, 7, 7, 0, 0, 0, false, false},
		{"a later run was closing", journal{1, jClosing, 0, buf, size, fp}, 7, 7, 0, 0, buf, true, false},
		{"a later run was unmapping", journal{1, jUnmapping, 0, buf, size, 0}, 7, 7, 0, 0, buf, false, false},
	}
	for _, c := range cases {
		p := planLeftover(LeftoverSite{Pending: c.pending, Done: c.done, Result: c.result, Journal: journalBytes(c.j)})
		if p.fp != c.wantFP || p.buf != c.wantBuf || (p.keep != "") != c.keep || p.unmarked != c.unmarked {
			t.Errorf("%s: plan %+v, want fp %#x buf %#x keep %v unmarked %v", c.name, p, c.wantFP, c.wantBuf, c.keep, c.unmarked)
		}
	}
}
