package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

const echoC = `
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
	char line[256];
	printf("ready %s\n", argc > 1 ? argv[1] : "");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		printf("got %s", line);
		fflush(stdout);
		if (strcmp(line, "quit\n") == 0)
			return 3;
	}
	return 0;
}
`

func TestBuildCSourceKeepsName(t *testing.T) {
	bin := BuildCSource(t, "echo.v1", echoC) // the dot must stay
	if filepath.Base(bin) != "echo.v1" {
		t.Errorf("built %s, want a file named echo.v1", bin)
	}
	if again := BuildCSource(t, "echo.v1", echoC); again != bin {
		t.Errorf("second build of the same program is %s, first %s", again, bin)
	}
	if other := BuildCSource(t, "echo.v1", echoC, "-DOTHER"); other == bin || filepath.Base(other) != "echo.v1" {
		t.Errorf("build with other flags is %s, first %s", other, bin)
	}
	tg := Start(t, bin, "hello")
	if tg.Ready() != "ready hello" {
		t.Errorf("Ready() = %q", tg.Ready())
	}
	if last, code := tg.Quit(); last != "got quit" || code != 3 {
		t.Errorf("Quit() = %q, %d", last, code)
	}
}

// fatalTB records the first Fatal instead of failing the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestBuildCSourceNameClash(t *testing.T) {
	BuildCSource(t, "clash", echoC)
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		BuildCSource(f, "clash", strings.Replace(echoC, "got", "had", 1))
	}()
	<-done
	if !strings.Contains(f.msg, `"clash"`) {
		t.Errorf("a second program named clash: Fatal(%q)", f.msg)
	}
}

func TestPrivateCopy(t *testing.T) {
	bin := BuildCSource(t, "echo", echoC)
	own := PrivateCopy(t, bin)
	if own == bin || filepath.Base(own) != "echo" {
		t.Errorf("PrivateCopy(%s) = %s", bin, own)
	}
	if err := os.Remove(own); err != nil {
		t.Fatal(err)
	}
	Start(t, bin) // the shared one is still there
}

func TestGlibcTrees(t *testing.T) {
	flags := GlibcSysroot(t) // skips without the trees
	bin := BuildCSource(t, "echo", echoC, flags...)
	for _, g := range GlibcTrees(t) {
		t.Run(g.Version, func(t *testing.T) {
			if g.Loader == "" {
				t.Skipf("no loader in %s", g.Dir)
			}
			if !fileExists(filepath.Join(g.LibDir, "libc.so.6")) {
				t.Errorf("no libc.so.6 in %s", g.LibDir)
			}
			StartCmd(t, g.Command(bin, "x"))
		})
	}
}
