package live_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/procfs"
)

// resident is how many bytes of [start, end) in pid are resident, by the
// package's pagemap reader. It is the one place in these tests that knows
// that API.
func resident(t *testing.T, pid int, start, end uint64) uint64 {
	t.Helper()
	pm, err := procfs.OpenPagemap(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer pm.Close()
	n, err := pm.Resident(start, end)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Resident counts the pages a process wrote and still holds: not pages it
// only read (the shared zero page), not pages it never touched, not pages
// it gave back with MADV_DONTNEED. A range that cuts pages counts the pages
// it overlaps.
func TestPagemapResident(t *testing.T) {
	lt := startLive(t, "park")
	pg := uint64(os.Getpagesize())
	q := uint64(lt.npages) / 4 // written, read, untouched, untouched
	p := lt.pages
	for _, c := range []struct {
		what       string
		start, end uint64
		want       uint64
	}{
		{"the whole region", p, p + 4*q*pg, q * pg},
		{"the written pages", p, p + q*pg, q * pg},
		{"the written pages, cut at both ends", p + 100, p + q*pg - 100, q * pg},
		{"one byte of a written page", p + pg + 7, p + pg + 8, pg},
		{"the pages only read", p + q*pg, p + 2*q*pg, 0},
		{"the untouched pages", p + 2*q*pg, p + 4*q*pg, 0},
		{"an empty range", p, p, 0},
	} {
		if got := resident(t, lt.Pid, c.start, c.end); got != c.want {
			t.Errorf("%s: %d bytes resident, want %d", c.what, got, c.want)
		}
	}
	if got := lt.Send("drop"); got != "ok" {
		t.Fatalf("drop: %q", got)
	}
	if got, want := resident(t, lt.Pid, p, p+4*q*pg), q/2*pg; got != want {
		t.Errorf("after MADV_DONTNEED of half the written pages: %d bytes resident, want %d", got, want)
	}
	lt.check(t)
	lt.quit(t)
}

// A process that is gone gives an error naming it.
func TestPagemapGone(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Skipf("pid %d was reused already", pid)
	}
	pm, err := procfs.OpenPagemap(pid)
	if err == nil {
		pm.Close()
		t.Fatalf("pagemap of exited process %d opened", pid)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Errorf("the error does not name process %d: %v", pid, err)
	}
}
