package inject

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// untouchedTop leaves 4 MiB at the top of the main heap that was never
// touched: malloc_trim(0) gives it back with sbrk and returns 1, and RSS
// does not move.
const untouchedTop = `#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	mallopt(M_TRIM_THRESHOLD, 512 << 20); /* free() keeps the top */
	mallopt(M_MMAP_THRESHOLD, 16 << 20); /* from the heap, not mmap (at most 32 MiB) */
	char *keep = malloc(1000);
	memset(keep, 1, 1000);
	char *volatile big = malloc(4 << 20); /* never written: never resident */
	free(big);
	printf("ready\n");
	char line[64];
	while (fgets(line, sizeof line, stdin))
		if (!strncmp(line, "quit", 4)) break;
	printf("clean\n");
	return 0;
}
`

// trim printed "returned 1 (memory was given back)" and then "released:
// 0 B of RSS" with nothing to reconcile them: what was given back was the
// heap's top, never resident (issue 22, item 6). It says so.
func TestTrimSaysWhatWasGivenBack(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildCSource(t, "untouched_top", untouchedTop))
	out := mustRun(t, "trim", fmt.Sprint(tg.Pid)).Stdout
	if !strings.Contains(out, "returned 1") {
		t.Fatalf("malloc_trim did not give anything back:\n%s", out)
	}
	if strings.Contains(out, "released: 0 B") || strings.Contains(out, "released: -") {
		if !strings.Contains(out, "of the main heap's top (sbrk), none of it resident") {
			t.Errorf("RSS did not move and trim does not say what was given back:\n%s", out)
		}
	}
	if !strings.Contains(out, "given back: 4.") {
		t.Errorf("no 4 MiB of top given back:\n%s", out)
	}
	mustQuit(t, tg)
	// The JSON says it too.
	tg = testutil.Start(t, testutil.BuildCSource(t, "untouched_top", untouchedTop))
	var doc struct {
		Result   *int    `json:"result"`
		Returned *uint64 `json:"heap_top_returned_bytes"`
	}
	if err := decodeDoc([]byte(mustRun(t, "trim", "--json", fmt.Sprint(tg.Pid)).Stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Result == nil || *doc.Result != 1 || doc.Returned == nil || *doc.Returned < 4<<20 {
		t.Errorf("trim --json: result %v, heap_top_returned_bytes %v", doc.Result, doc.Returned)
	}
	mustQuit(t, tg)
}
