package walk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// A core read from memory alone reports the version libc states of itself
// (its banner, when the core holds libc's read-only pages, else its file
// name), not the range its layout fits; when the two conflict, a note says
// so and the walk uses the layout memory has. The program runs under the
// system's glibc, whose libc is copied as libc-2.17.so (libc.so.6 a
// symlink to it, as up to 2.33): a name that contradicts its memory, as a
// distribution's 2.17 with later versions' fields backported does.
func TestCoreStatedVersion(t *testing.T) {
	const loader = "/lib64/ld-linux-x86-64.so.2"
	sysLibc, err := os.ReadFile("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip("no system libc.so.6")
	}
	lib := t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "libc-2.17.so"), sysLibc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("libc-2.17.so", filepath.Join(lib, "libc.so.6")); err != nil {
		t.Fatal(err)
	}
	bin := testutil.BuildC(t, "arenas.c")
	system := systemGlibc(t)
	for _, c := range []struct {
		name string
		// filter is the coredump_filter the target is given: 0x37 adds
		// file-backed private pages (bit 2), libc's banner among them.
		filter  string
		version string
		words   []string
	}{
		{"file name", "", "2.17", []string{"libc's file name libc-2.17.so says glibc 2.17, but memory does not have that version's layout"}},
		{"banner", "0x37", system, []string{"libc's banner in its memory says glibc " + system + ", libc's file name libc-2.17.so glibc 2.17: the banner is believed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(loader, "--library-path", lib, bin, "park", "2", "100")
			core, want := crashCoreFiltered(t, cmd, c.filter)
			args := []string{"--no-libc-file", core}
			rep := infoJSONOf(t, args...)
			if rep.Libc.Version != c.version || rep.Libc.VersionMin != "" || !strings.HasSuffix(rep.Libc.Path, "/libc-2.17.so") {
				t.Errorf("glibc %+v", rep.Libc)
			}
			notes := strings.Join(rep.Core.LibcNotes, "\n")
			for _, w := range c.words {
				if !strings.Contains(notes, w) {
					t.Errorf("notes lack %q:\n%s", w, notes)
				}
			}
			// The walk reads with the layout memory has: its totals are
			// glibc's whatever the label; with the banner, to the byte.
			got := mustRun(t, append([]string{"info", "--xml"}, args...)...).Stdout
			if c.version == system {
				if got != string(want) || !rep.ReadOnly.Exact {
					t.Errorf("exact %v; the walk differs from glibc's malloc_info\n--- glibc\n%s\n--- core\n%s", rep.ReadOnly.Exact, want, got)
				}
			} else {
				sameTotals(t, want, []byte(got))
				if rep.ReadOnly.Exact {
					t.Error("2.17 prints malloc_info unlike the layout read with, yet exact is true")
				}
			}
		})
	}
}

// crashCoreFiltered is crashCore with the target's coredump_filter set
// first ("" leaves the kernel's default).
func crashCoreFiltered(t *testing.T, cmd *exec.Cmd, filter string) (string, []byte) {
	t.Helper()
	if filter == "" {
		return crashCore(t, cmd)
	}
	testutil.EnableCores(t)
	dir := t.TempDir()
	cmd.Dir = dir
	tg := testutil.StartCmd(t, cmd)
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/coredump_filter", tg.Pid), []byte(filter), 0); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own.xml")
	if _, err := fmt.Fprintf(tg.Stdin(), "crash %s\n", own); err != nil {
		t.Fatal(err)
	}
	if l := tg.Next(); !strings.HasPrefix(l, "crashing") {
		t.Fatalf("target said %q", l)
	}
	tg.Wait()
	xml, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	return testutil.CoreOf(t, dir, tg.Pid), xml
}

// systemGlibc is the version of this machine's glibc ("2.36").
func systemGlibc(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("getconf", "GNU_LIBC_VERSION").Output()
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "glibc ")
	if err != nil || !ok {
		t.Skipf("getconf GNU_LIBC_VERSION: %q, %v", out, err)
	}
	return v
}
