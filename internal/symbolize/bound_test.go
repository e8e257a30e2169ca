package symbolize_test

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/testutil"
)

// named prints the address of a function of its own, built with DWARF.
const named = `
#include <stdio.h>
__attribute__((noinline)) int marker(int x) {
	return x * 3; /* marker's line */
}
int main(void) {
	char line[64];
	setvbuf(stdout, 0, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin))
		printf("%p %d\n", (void *)marker, marker(1));
	return 0;
}
`

// TestDWARFBounded: a symbolizer reads at most MaxDWARF of DWARF, all
// modules together (debug/elf holds it whole in memory for the session);
// a module past it is named by its symbols alone, and SkippedDWARF says
// which and how much.
func TestDWARFBounded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to read another process")
	}
	bin := testutil.BuildCSource(t, "named", named, "-g", "-O1")
	tg := testutil.Start(t, bin)
	addr, err := strconv.ParseUint(strings.TrimPrefix(strings.Fields(tg.Send("x"))[0], "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	size := symbolize.DWARFBytes(ef)
	ef.Close()
	if size == 0 {
		t.Fatal("the program has no DWARF")
	}
	lt, err := live.OpenObserved(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Close()
	for _, c := range []struct {
		max   uint64
		lines bool
	}{{symbolize.MaxDWARF, true}, {size, true}, {size - 1, false}} {
		old := symbolize.SetMaxDWARF(c.max)
		mods := module.NewTable(lt)
		sym := symbolize.New(mods)
		loc := sym.Symbolize(addr)
		skipped := sym.SkippedDWARF()
		mods.Close()
		symbolize.SetMaxDWARF(old)
		if loc.Function != "marker" {
			t.Errorf("bound %d: %#x is in %q, want marker", c.max, addr, loc.Function)
		}
		if got := filepath.Base(loc.File) == "named.c" && loc.Line > 0; got != c.lines {
			t.Errorf("bound %d, DWARF of %d bytes: at %s:%d, want a line: %v", c.max, size, loc.File, loc.Line, c.lines)
		}
		want := []symbolize.SkippedDWARF(nil)
		if !c.lines {
			want = []symbolize.SkippedDWARF{{Path: bin, Bytes: size}}
		}
		if len(skipped) != len(want) || len(want) == 1 && (filepath.Base(skipped[0].Path) != filepath.Base(bin) || skipped[0].Bytes != size) {
			t.Errorf("bound %d: skipped %+v, want %+v", c.max, skipped, want)
		}
		// The line growth and leaks print for it.
		if len(skipped) == 1 {
			line := skipped[0].String()
			if !strings.HasPrefix(line, skipped[0].Path+": ") || !strings.Contains(line, "DWARF are left out (at most 64 MiB are read") ||
				!strings.HasSuffix(line, "named without files, lines or inlined calls") {
				t.Errorf("the note says %q", line)
			}
		}
	}
}
