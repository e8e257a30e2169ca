package glibc

import (
	"fmt"
	"os"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The helpers below are the libc package's tests' too (a test file is not
// shared between packages).

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// waitC allocates a little, says "ready ADDR" and waits for stdin to close.
const waitC = `
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
	void *p = malloc(100);
	printf("ready %p\n", p);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	free(p);
	return 0;
}
`

// readMaps parses /proc/PID/maps.
func readMaps(t *testing.T, pid int) []maps.Mapping {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := maps.ParseMaps(f)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// mapFiles opens mappings the way a live process does: through
// /proc/PID/map_files, which works for files in other mount namespaces.
func mapFiles(pid int) libc.FileOpener {
	return func(m maps.Mapping) (*os.File, error) {
		return os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End))
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
