package walk

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// A static executable carries its own glibc malloc: --read-only reads it
// (main_arena and mp_ in the executable, from its .symtab or, stripped, from
// their static initialisers) and reproduces its malloc_info byte for byte,
// while injection still refuses it (exit 7: no libc.so.6 to call).
func TestReadOnlyStatic(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libc.a"); err != nil {
		t.Skip("no libc.a (libc6-dev) for gcc -static")
	}
	for _, c := range []struct {
		name, foundBy string
		flags         []string
	}{
		{"static", "symbols in ", []string{"-static"}},
		{"static-stripped", "static initialiser in the executable's .data", []string{"-static", "-s"}},
		{"static-pie", "symbols in ", []string{"-static-pie"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := testutil.BuildC(t, "arenas.c", c.flags...)
			tg := testutil.Start(t, bin, "park", "3")
			want := frozenTarget(t, tg)
			pid := fmt.Sprint(tg.Pid)
			got := mustRun(t, "info", "--read-only", "--xml", pid)
			if got.Stdout != string(want) {
				t.Fatalf("the walk differs from glibc's malloc_info\n--- glibc\n%s\n--- walk\n%s", want, got.Stdout)
			}
			info := readOnlyInfo(t, pid)
			ro := info.ReadOnly
			t.Logf("glibc %s (%s), found by %s", info.Libc.Version, info.Libc.VersionFrom, ro.FoundBy)
			if !info.Libc.Static || info.Libc.Path != bin || info.Libc.VersionFrom == "" {
				t.Errorf("glibc %+v", info.Libc)
			}
			if !strings.HasPrefix(ro.FoundBy, c.foundBy) {
				t.Errorf("found by %q, want %q...", ro.FoundBy, c.foundBy)
			}
			// The tcaches are found in the executable's own TLS block:
			// every thread has one, on an arena of its own.
			if len(ro.Threads) != 4 || len(ro.Damage) > 0 {
				t.Fatalf("threads %+v, damage %+v", ro.Threads, ro.Damage)
			}
			arenas := map[int]bool{}
			for _, th := range ro.Threads {
				if th.Tcache == 0 || th.Arena == nil || arenas[*th.Arena] {
					t.Errorf("thread %+v", th)
					continue
				}
				arenas[*th.Arena] = true
			}
			thaw(t, tg)
			expectRefusal(t, run(t, "info", pid), exitNotGlibc, "statically linked", "--read-only")
			mustQuit(t, tg)
		})
	}
}
