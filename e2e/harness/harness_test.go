package harness

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// The exit codes the tests expect are the ones docs/exit-codes.md
// documents, every one of them and no other.
func TestExitCodesAsDocumented(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "docs", "exit-codes.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllSubmatch(page, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		documented = append(documented, n)
	}
	ours := []int{ExitOK, ExitError, ExitUsage, ExitNoProcess, ExitPermission, ExitTraced, ExitState,
		ExitNotGlibc, ExitNoSafe, ExitCallFailed, ExitGone, ExitDamaged, ExitBadCore, ExitLockedStop,
		ExitNoImage, ExitNoSampler, ExitNoPerf, ExitNoMemory, ExitArch, ExitInterrupted, ExitBrokenPipe}
	if !slices.Equal(documented, ours) {
		t.Errorf("docs/exit-codes.md lists %v; the harness's constants are %v", documented, ours)
	}
}
