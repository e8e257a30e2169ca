package implant

import (
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/ptrace"
)

// A site whose saved rip lies in an older site (its thread was borrowed
// while still in the older one, as arenactl once did) keeps the older one
// for as long as it is kept itself, transitively; an unrelated site and
// one only a removable site points into are not held.
func TestKeepChained(t *testing.T) {
	sites := []ptrace.SiteInfo{
		{Addr: 0x10000, Size: 0x3000, Tid: 7, Resume: 0x401000}, // A: the thread's own code
		{Addr: 0x20000, Size: 0x3000, Tid: 7, Resume: 0x11044},  // B: restores into A
		{Addr: 0x30000, Size: 0x3000, Tid: 7, Resume: 0x21044},  // C: restores into B, kept
		{Addr: 0x40000, Size: 0x3000, Tid: 8, Resume: 0x401000}, // D: unrelated
		{Addr: 0x50000, Size: 0x3000, Tid: 9, Resume: 0x401000}, // E
		{Addr: 0x60000, Size: 0x3000, Tid: 9, Resume: 0x51044},  // F: restores into E, removable
	}
	why := []string{"", "", "thread 7 is still executing in it", "", "", ""}
	keepChained(sites, why)
	for i, want := range []string{"returns into it from the call site at 0x20000", "returns into it from the call site at 0x30000", "still executing", "", "", ""} {
		if want == "" && why[i] != "" || !strings.Contains(why[i], want) {
			t.Errorf("site %#x: kept %q, want %q", sites[i].Addr, why[i], want)
		}
	}
}
