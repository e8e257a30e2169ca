package stackprof

import (
	"testing"
	"time"
)

// A kept read serves what it holds for recentReuse, and the oldest of
// more than recentThreads keys is forgotten.
func TestRecentReads(t *testing.T) {
	var r RecentReads
	now := time.Now()
	r.Keep(1, 0x1000, make([]byte, 0x100), now)
	if b, ok := r.Covering(1, 0x1010, 0x1100, now.Add(recentReuse/2)); !ok || len(b) != 0xf0 {
		t.Fatalf("inside: %d bytes, %v", len(b), ok)
	}
	for _, c := range []struct {
		name           string
		key, addr, end uint64
		at             time.Time
	}{
		{"past its end", 1, 0x1010, 0x1101, now},
		{"below its start", 1, 0xff8, 0x1010, now},
		{"too old", 1, 0x1010, 0x1020, now.Add(recentReuse)},
		{"another key", 2, 0x1010, 0x1020, now},
	} {
		if _, ok := r.Covering(c.key, c.addr, c.end, c.at); ok {
			t.Errorf("%s: served", c.name)
		}
	}
	for k := uint64(2); k <= recentThreads; k++ {
		r.Keep(k, 0x1000, make([]byte, 0x100), now.Add(time.Duration(k)))
	}
	r.Keep(recentThreads+1, 0x1000, make([]byte, 0x100), now.Add(time.Hour))
	if _, ok := r.Covering(1, 0x1000, 0x1010, now); ok || len(r.m) != recentThreads {
		t.Errorf("the oldest key kept (%d keys)", len(r.m))
	}
}
