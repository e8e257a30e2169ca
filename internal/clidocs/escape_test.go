package clidocs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The man pages went through md2man as markdown: "main_arena and mp_"
// came out as "mainarena and mp" with italics between (issue 22, item 8).
// Text keeps its underscores, asterisks and backquotes, in the commands'
// descriptions and the flags', and the completions keep the text unescaped.
func TestManPagesKeepMarkup(t *testing.T) {
	root := &cobra.Command{Use: "arenactl", Short: "root"}
	info := &cobra.Command{Use: "info PID|CORE", Short: "reads main_arena and mp_", Long: "finds main_arena and mp_ from *symbols* or `.data`", Run: func(*cobra.Command, []string) {}}
	info.Flags().String("debug-dir", "", "DIR/.build-id/xx/rest.debug locates main_arena and mp_")
	root.AddCommand(info)
	dir := t.TempDir()
	if err := Write(root, dir, "arenactl test"); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "man", "man1", "arenactl-info.1"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	if man, err := exec.LookPath("man"); err == nil {
		out, err := exec.Command(man, "-l", "-P", "cat", filepath.Join(dir, "man", "man1", "arenactl-info.1")).Output()
		if err == nil {
			text = string(out)
		}
	}
	text = strings.ReplaceAll(text, "\\_", "_")
	for _, want := range []string{"main_arena and mp_ from *symbols* or `.data`", "locates main_arena and mp_"} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
			t.Errorf("the page lacks %q:\n%s", want, text)
		}
	}
	if info.Flags().Lookup("debug-dir").Usage != "DIR/.build-id/xx/rest.debug locates main_arena and mp_" || info.Long != "finds main_arena and mp_ from *symbols* or `.data`" {
		t.Errorf("the command tree was left escaped: %q, %q", info.Flags().Lookup("debug-dir").Usage, info.Long)
	}
}
