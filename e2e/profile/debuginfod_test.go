package profile

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/testutil"
)

// A stripped server's stacks get their names and lines from a debuginfod
// server (elfutils' own, run here over a directory of debug files, as a
// distribution runs one for its packages): with DEBUGINFOD_URLS set the
// site is map_pages at grow_sites.c, fetched before the window opens;
// unset, nothing is fetched and the frame is an offset in the file.
func TestGrowthNamesFromDebuginfod(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-g", "-fomit-frame-pointer", "-Wl,--build-id")
	dir := t.TempDir()
	dbg := filepath.Join(dir, "grow_sites.debug")
	if out, err := exec.Command("objcopy", "--only-keep-debug", bin, dbg).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	if out, err := exec.Command("strip", "--strip-all", bin).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, out)
	}
	ef, err := elf.Open(dbg)
	if err != nil {
		t.Fatal(err)
	}
	id := module.BuildIDOf(ef)
	ef.Close()
	url := testutil.Debuginfod(t, dir, id)

	site := func(env []string) (schema.LeakFrame, bool) {
		tg := testutil.Start(t, bin)
		js := growthMapping8Env(t, tg, env, "--duration", "3s", "--json", "--period", "4")
		var doc schema.Growth
		if err := json.Unmarshal([]byte(js), &doc); err != nil {
			t.Fatalf("%v\n%s", err, js)
		}
		for _, s := range doc.Sites {
			if i := slices.IndexFunc(s.Frames, func(f schema.LeakFrame) bool { return f.Function == "map_pages" }); i >= 0 && s.Class == "anon" {
				return s.Frames[i], true
			}
		}
		return schema.LeakFrame{}, false
	}
	if _, ok := site(os.Environ()); ok {
		t.Fatal("map_pages named in a stripped program with no debuginfod: the test proves nothing")
	}
	cache := filepath.Join(t.TempDir(), "cache")
	env := append(os.Environ(), "DEBUGINFOD_URLS="+url, "DEBUGINFOD_CACHE_PATH="+cache)
	f, ok := site(env)
	if !ok || !strings.HasSuffix(f.File, "grow_sites.c") || f.Line == 0 {
		t.Fatalf("with debuginfod: map_pages at %s:%d (found %v)", f.File, f.Line, ok)
	}
	if _, err := os.Stat(filepath.Join(cache, id, "debuginfo")); err != nil {
		t.Errorf("the debug file is not in the cache: %v", err)
	}
}
