package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/testutil"
)

// snapshot -o never replaces what is not a regular file (a device node, a
// FIFO, a symbolic link), refuses before touching the target, and removes
// the partial files a killed snapshot of the same path left.
func TestSnapshotOutputNotRegular(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "2")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	if err := unix.Mknod(p("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	unix.Mkfifo(p("fifo"), 0o644)
	os.WriteFile(p("kept"), []byte("kept"), 0o644)
	os.Symlink(p("kept"), p("link"))
	pid := fmt.Sprint(tg.Pid)
	for out, kind := range map[string]string{"null": "character device", "fifo": "FIFO", "link": "symbolic link"} {
		expectRefusal(t, run(t, "snapshot", pid, "-o", p(out)), exitUsage, p(out), "not a regular file ("+"a "+kind+")")
	}
	expectRefusal(t, run(t, "snapshot", pid, "-o", dir), exitUsage, "is a directory")
	var st unix.Stat_t
	if unix.Lstat(p("null"), &st); st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("the device node was replaced (mode %o)", st.Mode)
	}
	if l, _ := os.Readlink(p("link")); l != p("kept") {
		t.Errorf("the link was replaced")
	}
	if b, _ := os.ReadFile(p("kept")); string(b) != "kept" {
		t.Errorf("the link's file was written: %q", b)
	}

	// What a SIGKILLed snapshot leaves: a partial file nobody holds.
	stale := p(".snap.core.partial-1234")
	os.WriteFile(stale, make([]byte, 4096), 0o600)
	r := mustRun(t, "snapshot", pid, "-o", p("snap.core"))
	if !strings.Contains(r.stderr, "removed 1 partial file") || !strings.Contains(r.stderr, stale) {
		t.Errorf("stderr: %q", r.stderr)
	}
	if _, err := os.Lstat(stale); err == nil {
		t.Error("the stale partial file is still there")
	}
	if left, _ := filepath.Glob(p(".*")); len(left) != 0 {
		t.Errorf("hidden files left: %v", left)
	}
	if testutil.Traced(tg.Pid) || processState(tg.Pid) != 'S' {
		t.Error("the target was left traced or stopped")
	}
	mustQuit(t, tg)
}
