package glibc

import (
	"strings"
	"testing"
)

// From 2.42 a bin's free slots and entries add up to the capacity every bin
// started with: a bin whose sum differs is damage, whatever the capacity.
func TestCheckSlots(t *testing.T) {
	var bins []binSlots
	for i := 0; i < 76; i++ {
		bins = append(bins, binSlots{tid: 7, bin: i, tcache: 0x1000, slots: 16})
	}
	bins[3].slots, bins[3].list = 13, 3 // three chunks cached: consistent
	if d := checkSlots(bins); len(d) != 0 {
		t.Fatalf("consistent bins: %v", d)
	}
	bins[5].list = 2 // two entries, yet no slot used
	d := checkSlots(bins)
	if len(d) != 1 || !strings.Contains(d[0].What, "bin 5 has 16 free slots and 2 entries") || !strings.Contains(d[0].What, "holds 16") {
		t.Fatalf("damaged bin 5: %v", d)
	}
	if d := checkSlots(nil); len(d) != 0 {
		t.Fatalf("no bins: %v", d)
	}
}
