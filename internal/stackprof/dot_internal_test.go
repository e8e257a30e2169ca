package stackprof

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeDot writes an executable named dot in dir.
func fakeDot(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "dot")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The graph view runs a dot only when PATH leads to a system one through
// directories no user but root can add a dot to.
func TestGraphvizOnlySystemDot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the directories checked must be root's")
	}
	mine := t.TempDir() // root's, 0700, under the sticky /tmp
	dot := fakeDot(t, mine)
	open := t.TempDir()
	os.Chmod(open, 0o777)
	fakeDot(t, open)
	emptyOpen := t.TempDir()
	os.Chmod(emptyOpen, 0o777)
	nobodys := t.TempDir()
	fakeDot(t, nobodys)
	os.Chown(nobodys, 65534, 65534)
	groupDot := t.TempDir()
	os.Chmod(fakeDot(t, groupDot), 0o775)

	defer func(old []string) { systemDots = old }(systemDots)
	systemDots = []string{dot, filepath.Join(open, "dot"), filepath.Join(nobodys, "dot"), filepath.Join(groupDot, "dot")}
	for _, c := range []struct {
		path, want string
	}{
		{mine, dot},
		{emptyOpen + ":" + mine, ""},      // a user could put a dot first
		{open, ""},                        // a dot any user may replace
		{nobodys + ":" + mine, ""},        // another user's directory
		{groupDot, ""},                    // a dot its group may rewrite
		{".:" + mine, ""},                 // the working directory
		{":" + mine, ""},                  // the same, spelled empty
		{"relative/bin:" + mine, ""},      // a relative directory
		{"/nonexistent/bin:" + mine, dot}, // not there, and only root can make it
		{filepath.Join(emptyOpen, "bin") + ":" + mine, ""}, // not there, and a user can make it
		{filepath.Join(mine, "x"), ""},                     // no dot at all
		{"/proc/self/root" + mine, dot2(mine)},
	} {
		if got := graphviz(c.path); got != c.want {
			t.Errorf("PATH=%s: %q, want %q", c.path, got, c.want)
		}
	}
	// A dot of root's own that is not the system's: left out.
	systemDots = []string{"/usr/bin/dot"}
	if got := graphviz(mine); got != "" {
		t.Errorf("a dot outside the system's directories: %q", got)
	}
}

// dot2 is the dot found under mine through /proc/self/root: the same file,
// by a path through symbolic links.
func dot2(mine string) string { return filepath.Join("/proc/self/root"+mine, "dot") }
