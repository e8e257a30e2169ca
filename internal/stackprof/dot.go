package stackprof

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// systemDots are where a system's package manager puts Graphviz's dot: the
// only ones the graph view may run.
var systemDots = []string{"/usr/bin/dot", "/usr/local/bin/dot"}

// graphviz is the dot that pprof's graph view will run, decided once when
// the view is set up; "" leaves the view out.
//
// pprof runs `dot` by name at each request for /ui/graph (dotToSvg in its
// internal/driver/webui.go), through arenactl's PATH, as root. A PATH that
// names a directory some user can write (~/bin under sudo's kept PATH, ".",
// /tmp) would let that user's dot run as root when anyone opens the view.
// So the view is served only when the dot that PATH finds is one of
// systemDots, root's own, and every directory PATH searches before it is
// one that only root can add a dot to: then the dot found at each request
// is the one checked here.
func graphviz(path string) string {
	var found string
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) || !searchable(dir) {
			return ""
		}
		candidate := filepath.Join(dir, "dot")
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			found = candidate
			break
		}
	}
	if found == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(found)
	if err != nil {
		return ""
	}
	for _, sys := range systemDots {
		if r, err := filepath.EvalSymlinks(sys); err == nil && r == real && rootOnly(real, true) {
			return found
		}
	}
	return ""
}

// searchable says whether only root can add a dot to dir: dir is root-only,
// or it does not exist and only root can make it (its nearest existing
// directory above is root-only, sticky or not).
func searchable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		_, err := os.Lstat(d)
		if err == nil {
			return rootOnly(d, false)
		}
		if !errors.Is(err, fs.ErrNotExist) || d == "/" {
			return false
		}
	}
}

// rootOnly says whether only root can change what name leads to: name and
// each directory above it are root's and writable by nobody else, but for
// a directory above name with the sticky bit (/tmp: others cannot rename
// or remove root's entries in it). Symbolic links are followed and their
// targets checked in the same way.
func rootOnly(name string, file bool) bool {
	real, err := filepath.EvalSymlinks(name)
	if err != nil {
		return false
	}
	for p, first := real, true; ; p, first = filepath.Dir(p), false {
		fi, err := os.Lstat(p)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != 0 {
			return false
		}
		if fi.Mode()&0o022 != 0 && (first || fi.Mode()&fs.ModeSticky == 0) {
			return false
		}
		if first && file != fi.Mode().IsRegular() {
			return false
		}
		if p == "/" || !strings.HasPrefix(p, "/") {
			return p == "/"
		}
	}
}

// graphView is the dot the graph view runs, "" to leave the view out: the
// one graphviz accepts of arenactl's PATH, if it is also the one Go's
// exec.LookPath, which pprof's exec.Command("dot") calls, finds.
func graphView() string {
	dot := graphviz(os.Getenv("PATH"))
	if p, err := exec.LookPath("dot"); err != nil || p != dot {
		return ""
	}
	return dot
}
