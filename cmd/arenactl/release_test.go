package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// staticELF fails the test unless path is a static x86_64 executable: no
// program interpreter, no shared libraries, and (stripped) no symbol table
// or DWARF when stripped is set.
func staticELF(t *testing.T, path string, stripped bool) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
		t.Errorf("%s: %v %v, want an x86_64 executable", path, f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v segment: dynamically linked", path, p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("%s needs %v (%v)", path, libs, err)
	}
	if !stripped {
		return
	}
	for _, s := range f.Sections {
		if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("%s is not stripped: it has %s", path, s.Name)
		}
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// scripts/release.sh builds what it promises: a static, stripped binary
// that reports the stamped version and commit and works on a real target,
// a man page per command, completions, a tarball of them, and checksums
// that match.
// releaseMaxBytes is the README's bound on the released binary's size.
const releaseMaxBytes = 24e6

func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the release build compiles the standard library afresh (-trimpath)")
	}
	root := testutil.RepoRoot(t)
	const version = "v0.0.0-releasetest"
	dist := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "release.sh"), version)
	cmd.Env = append(os.Environ(), "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, out)
	}
	name := "arenactl-" + version + "-linux-amd64"
	bin := filepath.Join(dist, name, "arenactl")
	staticELF(t, bin, true)
	// The README states the stripped binary's size ("about 20 MB") and
	// this bound; a dependency that grows it past the bound must change
	// the README too.
	if fi, err := os.Stat(bin); err != nil {
		t.Error(err)
	} else if t.Logf("released binary: %.1f MB", float64(fi.Size())/1e6); fi.Size() > releaseMaxBytes {
		t.Errorf("the released binary is %d bytes, over the README's bound of %.0f", fi.Size(), releaseMaxBytes)
	}
	if b, err := os.ReadFile(bin); err != nil || bytes.Contains(b, []byte(root)) {
		t.Errorf("the binary holds the build directory %s (-trimpath) or cannot be read: %v", root, err)
	}

	r := runCmd(t, exec.Command(bin, "version"))
	t.Logf("released arenactl version:\n%s", r.Stdout)
	lines := strings.Split(r.Stdout, "\n")
	if r.Code != 0 || lines[0] != "arenactl "+version || !strings.Contains(r.Stdout, "CGO_ENABLED=0 (static)") {
		t.Errorf("released arenactl version: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		if want := "commit:  " + strings.TrimSpace(string(head)); !strings.Contains(r.Stdout, want) {
			t.Errorf("released arenactl version lacks %q:\n%s", want, r.Stdout)
		}
	}
	// The static binary does the real job: an injected info and a
	// read-only one on a live target.
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "2")
	for _, args := range [][]string{{"info", "--json"}, {"info", "--read-only", "--json"}} {
		r := runCmd(t, exec.Command(bin, append(args, fmt.Sprint(tg.Pid))...))
		if r.Code != 0 || !strings.Contains(r.Stdout, `"arenas"`) {
			t.Errorf("released arenactl %v: exit %d\n%s", args, r.Code, r.Stderr)
		}
	}

	// A page per visible command, naming the release.
	for _, c := range append(newRoot().Commands(), newRoot()) {
		if !c.IsAvailableCommand() && c.HasParent() {
			continue
		}
		page := "arenactl.1"
		if c.HasParent() {
			page = "arenactl-" + c.Name() + ".1"
		}
		b, err := os.ReadFile(filepath.Join(dist, name, "man", "man1", page))
		if err != nil {
			t.Error(err)
		} else if !bytes.Contains(b, []byte(`"arenactl `+version+`"`)) {
			t.Errorf("%s does not name the release:\n%.300s", page, b)
		}
	}
	for _, s := range []struct{ file, shell string }{{"arenactl.bash", "bash"}, {"_arenactl", "zsh"}, {"arenactl.fish", "fish"}} {
		path := filepath.Join(dist, name, "completions", s.file)
		if _, err := os.Stat(path); err != nil {
			t.Error(err)
		} else if sh, err := exec.LookPath(s.shell); err == nil {
			if out, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
				t.Errorf("%s -n %s: %v\n%s", s.shell, s.file, err, out)
			}
		}
	}
	// The scripts ask the binary itself; its answer must hold the flags.
	if r := runCmd(t, exec.Command(bin, "__complete", "info", "--re")); r.Code != 0 || !strings.Contains(r.Stdout, "--read-only") {
		t.Errorf("arenactl __complete info --re: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// Every line of SHA256SUMS matches, and covers the binary and tarball.
	sums, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	summed := map[string]bool{}
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Errorf("SHA256SUMS line %q is not sha256sum's format", sc.Text())
			continue
		}
		if got := sha256File(t, filepath.Join(dist, file)); got != sum {
			t.Errorf("SHA256SUMS says %s for %s, it is %s", sum, file, got)
		}
		summed[file] = true
	}
	for _, f := range []string{name + "/arenactl", name + ".tar.gz", name + "/man/man1/arenactl-info.1"} {
		if !summed[f] {
			t.Errorf("SHA256SUMS lacks %s", f)
		}
	}

	// The tarball holds the same binary, under the release's directory.
	tgz, err := os.Open(filepath.Join(dist, name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer tgz.Close()
	zr, err := gzip.NewReader(tgz)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Name, name+"/") {
			t.Errorf("tarball entry %s is outside %s/", h.Name, name)
		}
		if h.Name == name+"/arenactl" {
			b, _ := io.ReadAll(tr)
			s := sha256.Sum256(b)
			found = hex.EncodeToString(s[:]) == sha256File(t, bin) && h.Mode&0o111 != 0
		}
	}
	if !found {
		t.Errorf("the tarball lacks %s/arenactl as built, executable", name)
	}
}

func TestReleaseRefusesBadVersion(t *testing.T) {
	root := testutil.RepoRoot(t)
	dist := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "release.sh"), "v1 2")
	cmd.Env = append(os.Environ(), "DIST="+dist)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "VERSION 'v1 2'") {
		t.Errorf("release.sh 'v1 2': %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(dist); len(ents) > 0 {
		t.Errorf("release.sh wrote %d entries after refusing", len(ents))
	}
}

// What a user's `CGO_ENABLED=0 go install github.com/arenactl/arenactl/cmd/arenactl@vX`
// does, offline: the module is served at a made-up version from a
// file:// proxy, its dependencies from this machine's module cache (itself
// laid out as a proxy), into an empty module cache and an empty GOBIN. The
// binary then takes its version from the module version Go records.
// (.ci/run also installs from the real module proxy with a clean cache.)
// With -trimpath the build cache keys of the dependencies do not name the
// directory they were unpacked in, so the empty module cache does not make
// every dependency compile afresh (129 s of a loaded 2-CPU machine): those
// TestRelease's trimmed build compiled are reused. The module's own
// packages still compile from the served zip.
func TestGoInstallAtVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go install compiles every dependency afresh")
	}
	const mod, version = "github.com/arenactl/arenactl", "v0.98.0"
	root := testutil.RepoRoot(t)
	hostCache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	proxy, modcache, gobin, work := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	vdir := filepath.Join(proxy, mod, "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(vdir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("list", []byte(version+"\n"))
	write(version+".info", []byte(`{"Version":"`+version+`","Time":"2026-01-01T00:00:00Z"}`))
	write(version+".mod", gomod)
	write(version+".zip", moduleZip(t, root, mod+"@"+version))

	cmd := exec.Command("go", "install", mod+"/cmd/arenactl@"+version)
	cmd.Dir = work // outside any module, as a user would be
	cmd.Env = append(os.Environ(),
		"GOPROXY=file://"+proxy+",file://"+filepath.Join(strings.TrimSpace(string(hostCache)), "cache", "download"),
		"GOSUMDB=off", // the made-up version is in no checksum database
		"GOMODCACHE="+modcache, "GOBIN="+gobin, "GOFLAGS=-modcacherw -trimpath", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/arenactl@%s: %v\n%s", mod, version, err, out)
	}
	bin := filepath.Join(gobin, "arenactl")
	staticELF(t, bin, false)
	r := runCmd(t, exec.Command(bin, "version"))
	t.Logf("installed arenactl version:\n%s", r.Stdout)
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "arenactl "+version+"\nmodule:  "+mod+" "+version+"\n") {
		t.Errorf("installed arenactl version: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// moduleZip is the module's source as the proxy serves it: every file
// under prefix/, here only go.mod, go.sum and the non-test Go files the
// build needs, leaving out testdata (C targets, cores).
func moduleZip(t *testing.T, root, prefix string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		// Every regular file, as the go command's own zips have it: a
		// package may embed more than Go source (internal/sampler embeds
		// its image).
		if !d.Type().IsRegular() || strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		w, err := zw.Create(prefix + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
