package debuginfod

import (
	"context"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// debugPair builds a program with DWARF, splits its debug file off as a
// distribution does (objcopy --only-keep-debug) into a directory of its
// own, and returns that directory and the build-id.
func debugPair(t *testing.T) (dir, buildID string) {
	t.Helper()
	bin := testutil.BuildC(t, "idle.c", "-g", "-Wl,--build-id")
	dir = t.TempDir()
	dbg := filepath.Join(dir, "idle.debug")
	if out, err := exec.Command("objcopy", "--only-keep-debug", bin, dbg).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	ef, err := elf.Open(dbg)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	return dir, module.BuildIDOf(ef)
}

func client(t *testing.T, url string) *Client {
	t.Helper()
	t.Setenv("DEBUGINFOD_URLS", url)
	t.Setenv("DEBUGINFOD_CACHE_PATH", filepath.Join(t.TempDir(), "cache"))
	c, err := FromEnv()
	if err != nil || c == nil {
		t.Fatalf("FromEnv: %v, %v", c, err)
	}
	return c
}

// A debug file comes from a real debuginfod server into the cache, checked;
// the cache answers the second time with the server gone; a build-id no
// server has is ErrNotFound.
func TestFetchFromServer(t *testing.T) {
	dir, id := debugPair(t)
	url := testutil.Debuginfod(t, dir, id)
	c := client(t, url)
	p, err := c.Fetch(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(c.Cache, id, "debuginfo") {
		t.Errorf("fetched into %s", p)
	}
	if err := checkFile(p, id); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Dir(p)); fi.Mode().Perm() != 0o700 {
		t.Errorf("cache entry mode %v", fi.Mode())
	}
	c.URLs = []string{"http://127.0.0.1:1"} // nothing listens there
	if p2, err := c.Fetch(context.Background(), id); err != nil || p2 != p {
		t.Errorf("from the cache: %q, %v", p2, err)
	}
	c.URLs = []string{url}
	other := strings.Repeat("ab", 20)
	if _, err := c.Fetch(context.Background(), other); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown build-id: %v, want ErrNotFound", err)
	}
	// Over DEBUGINFOD_MAXSIZE: refused, nothing kept.
	c2 := client(t, url)
	c2.MaxSize = 100
	if _, err := c2.Fetch(context.Background(), id); err == nil || !strings.Contains(err.Error(), "DEBUGINFOD_MAXSIZE") {
		t.Errorf("over the size bound: %v", err)
	}
	if _, err := os.Stat(c2.Path(id)); err == nil {
		t.Error("a file over the bound was kept")
	}
}

// Off unless DEBUGINFOD_URLS names servers; a URL that is not http(s) is
// refused; the environment's bounds are read.
func TestFromEnv(t *testing.T) {
	t.Setenv("DEBUGINFOD_URLS", "")
	if c, err := FromEnv(); c != nil || err != nil {
		t.Errorf("unset: %v, %v", c, err)
	}
	t.Setenv("DEBUGINFOD_URLS", "file:///etc")
	if _, err := FromEnv(); err == nil {
		t.Error("a file: URL was accepted")
	}
	t.Setenv("DEBUGINFOD_URLS", "https://a.example https://b.example/")
	t.Setenv("DEBUGINFOD_MAXSIZE", "1000")
	t.Setenv("DEBUGINFOD_TIMEOUT", "3")
	t.Setenv("DEBUGINFOD_CACHE_PATH", "/var/cache/x")
	c, err := FromEnv()
	if err != nil || len(c.URLs) != 2 || c.MaxSize != 1000 || c.Timeout.Seconds() != 3 || c.Cache != "/var/cache/x" {
		t.Errorf("%+v, %v", c, err)
	}
	t.Setenv("DEBUGINFOD_MAXTIME", "-1")
	if _, err := FromEnv(); err == nil {
		t.Error("a negative DEBUGINFOD_MAXTIME was accepted")
	}
	for _, id := range []string{"", "a", "../../etc/passwd", "ABCD", strings.Repeat("a", 130)} {
		if validBuildID(id) {
			t.Errorf("%q taken for a build-id", id)
		}
	}
}

// A cache that another user could change is refused before anything is
// fetched or read: a directory writable by others, one of theirs, or one
// under a directory of theirs.
func TestUnsafeCacheRefused(t *testing.T) {
	c := &Client{URLs: []string{"http://127.0.0.1:1"}, MaxSize: MaxSize, Timeout: Timeout, MaxTime: MaxTime}
	id := strings.Repeat("cd", 20)
	base := t.TempDir()
	os.Chmod(base, 0o755)

	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	theirs := filepath.Join(base, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Chown(theirs, 65534, 65534)
	under := filepath.Join(theirs, "cache")
	os.Mkdir(under, 0o700)
	link := filepath.Join(base, "link")
	os.Symlink(open, link)
	for _, dir := range []string{open, theirs, under, link} {
		c.Cache = dir
		_, err := c.Fetch(context.Background(), id)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), "cache") {
			t.Errorf("cache %s: %v, want a refusal", dir, err)
		}
	}
	// A sticky, world-writable directory above (as /tmp) is fine.
	sticky := filepath.Join(base, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	c.Cache = filepath.Join(sticky, "mine")
	if _, err := c.Fetch(context.Background(), id); err == nil || strings.Contains(err.Error(), "cache") {
		t.Errorf("a cache under a sticky directory: %v, want only the fetch to fail", err)
	}
}
