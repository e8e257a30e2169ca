package profile

import (
	"bufio"
	"crypto/rand"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// leaksStarted starts cmd (arenactl leaks) and reads its stderr until a
// line holds want, which it returns. All of stderr goes to said; the
// function it returns waits for stderr's end (arenactl's exit) and returns
// it. The command is killed when the test ends.
func leaksStarted(t *testing.T, cmd *exec.Cmd, want string, said *strings.Builder) (string, func() string) {
	t.Helper()
	// A pipe of our own, not StderrPipe: Wait would close it under a
	// reader still copying.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); r.Close() })
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), want) {
			var rest strings.Builder
			done := make(chan struct{})
			go func() {
				io.Copy(&rest, r)
				close(done)
			}()
			return lines.Text(), func() string {
				<-done
				return said.String() + rest.String()
			}
		}
	}
	cmd.Wait()
	t.Fatalf("arenactl leaks never said %q: %s", want, said.String())
	return "", nil
}

// TestLeaksHTTPServesOnlyTheProfile: leaks --http serves, as root, the
// profile of a process whose DWARF places the leaking function in a file
// only root can read (#line 1 "SECRET"). No page shows that file's text,
// pprof's settings are never written (saveconfig), and nothing at all is
// served without the secret path arenactl prints.
func TestLeaksHTTPServesOnlyTheProfile(t *testing.T) {
	dir := t.TempDir()
	var b [8]byte
	rand.Read(b[:])
	mark := "ARENACTL-SECRET-" + hex.EncodeToString(b[:])
	secret := filepath.Join(dir, "secret.txt")
	var text strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&text, "%s line %d\n", mark, i)
	}
	if err := os.WriteFile(secret, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := testutil.BuildC(t, "secretline.c", "-O2", fmt.Sprintf(`-DSECRET_FILE="%s"`, secret))
	tg := testutil.Start(t, bin)

	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o700)
	cmd := exec.Command(arenactl, "leaks", "--duration", "1s", "--rate", "16K", "--http", "127.0.0.1:0", fmt.Sprint(tg.Pid))
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	// A file, not a pipe: what arenactl printed before it serves is
	// there when it says it serves.
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = out
	var said strings.Builder
	line, _ := leaksStarted(t, cmd, "serving the profile at ", &said)
	_, u, _ := strings.Cut(line, "serving the profile at ")
	u, _, _ = strings.Cut(u, " ")
	base, ok := strings.CutSuffix(u, "/ui/flamegraph")
	if !ok {
		t.Fatalf("served at %q", u)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if table, _ := os.ReadFile(out.Name()); !strings.Contains(string(table), "secret_leak") {
		t.Fatalf("the profile has no secret_leak site:\n%s", table)
	}

	get := func(method, u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, u, nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer r.Body.Close()
		body, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(body)
	}
	// Every page pprof has, with the queries that name the function.
	pages := []string{"", "flamegraph", "top", "graph", "peek?f=secret_leak", "source?f=secret_leak", "source?f=.*",
		"disasm?f=secret_leak", "download", "flamegraph?f=secret_leak&g=lines"}
	for _, page := range pages {
		for _, prefix := range []string{base + "/ui/", "http://" + pu.Host + "/ui/", "http://" + pu.Host + "/"} {
			code, body := get(http.MethodGet, prefix+page)
			if strings.Contains(body, mark) {
				t.Errorf("GET %s (%d) shows the root-only file's text", prefix+page, code)
			}
			if prefix != base+"/ui/" && code != http.StatusNotFound && code != http.StatusForbidden {
				t.Errorf("GET %s without the secret path: %d", prefix+page, code)
			}
		}
	}
	if code, body := get(http.MethodGet, base+"/ui/top"); code != http.StatusOK || !strings.Contains(body, "secret_leak") {
		t.Errorf("the top page: %d, secret_leak there: %v", code, strings.Contains(body, "secret_leak"))
	}
	for _, page := range []string{"saveconfig?config=mine&f=x", "deleteconfig?config=mine"} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			for _, prefix := range []string{base + "/ui/", "http://" + pu.Host + "/ui/"} {
				if code, _ := get(method, prefix+page); code != http.StatusNotFound {
					t.Errorf("%s %s: %d", method, prefix+page, code)
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "pprof")); err == nil {
		t.Errorf("pprof's settings were written under %s", home)
	}

	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("arenactl leaks --http after SIGINT: %v\n%s", err, said.String())
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// samplerMapped returns the target's anonymous executable mappings: a C
// program of testdata has none, the sampler's code is one.
func samplerMapped(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && strings.Contains(f[1], "x") {
			out = append(out, l)
		}
	}
	return out
}

// exitOf waits for cmd and returns its exit code, failing the test if a
// signal killed it or it did not end in time.
func exitOf(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(testutil.Patience):
		cmd.Process.Kill()
		t.Fatalf("arenactl did not end within %v", testutil.Patience)
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("arenactl was killed by %v (%v)", ws.Signal(), err)
	}
	return ws.ExitStatus()
}

// TestLeaksSIGPIPE: `arenactl leaks PID 2>&1 | true`. Its output's reader
// is gone before the window opens; the note that it opened raises SIGPIPE.
// arenactl must end the window, put the GOT back and remove the sampler,
// then exit 141 (not die of the signal with the hooks in place). With only
// stdout gone, the profile's write at the end does the same.
func TestLeaksSIGPIPE(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
	for _, both := range []bool{true, false} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		cmd := exec.Command(arenactl, "leaks", "--duration", "0", "--rate", "64K", fmt.Sprint(tg.Pid))
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = w, &stderr
		if both {
			cmd.Stderr = w
			cmd.Args[3] = "0" // until interrupted: only the SIGPIPE ends it
		} else {
			cmd.Args[3] = "1s"
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if code := exitOf(t, cmd); code != exitBrokenPipe {
			t.Errorf("2>&1 %v: exit %d, want %d; stderr %q", both, code, exitBrokenPipe, stderr.String())
		}
		if m := samplerMapped(t, tg.Pid); len(m) > 0 {
			t.Errorf("2>&1 %v: the sampler is still mapped: %q", both, m)
		}
		if testutil.Traced(tg.Pid) {
			t.Errorf("2>&1 %v: the target is still traced", both)
		}
		if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
			t.Fatalf("target: %q", a)
		}
	}
	// The next run finds nothing an earlier one left.
	if r := mustRun(t, "leaks", "--duration", "200ms", fmt.Sprint(tg.Pid)); strings.Contains(r.Stderr, "left at") {
		t.Errorf("a sampler was left behind: %s", r.Stderr)
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// TestLeaksSignalsDetach: the signals Go's runtime would exit on with a
// stack dump (Ctrl-\'s SIGQUIT, a watchdog's SIGABRT, a fault signal sent
// by kill) end the window as Ctrl-C does: the sampler is removed, the
// profile printed, exit 0.
func TestLeaksSignalsDetach(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGABRT, syscall.SIGSEGV} {
		cmd := exec.Command(arenactl, "leaks", "--duration", "0", "--rate", "64K", fmt.Sprint(tg.Pid))
		out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = out
		var said strings.Builder
		leaksStarted(t, cmd, "the window is open", &said)
		cmd.Process.Signal(sig)
		code := exitOf(t, cmd)
		out.Close()
		table, _ := os.ReadFile(out.Name())
		if code != exitOK || !strings.Contains(string(table), "heap profile over") {
			t.Errorf("%v: exit %d, want %d; stdout %q", sig, code, exitOK, table)
		}
		if m := samplerMapped(t, tg.Pid); len(m) > 0 {
			t.Errorf("%v: the sampler is still mapped: %q", sig, m)
		}
		if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
			t.Fatalf("target: %q", a)
		}
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// gotHooked says whether lib's GOT entry for malloc, in pid, points into
// an anonymous executable mapping (the sampler's code); false while lib
// is not mapped.
func gotHooked(t *testing.T, pid int, lib string) bool {
	t.Helper()
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.DynamicSymbols()
	var off uint64
	for _, sec := range f.Sections {
		if sec.Type != elf.SHT_RELA {
			continue
		}
		data, _ := sec.Data()
		for i := 0; i+24 <= len(data); i += 24 {
			info := binary.LittleEndian.Uint64(data[i+8:])
			if elf.R_X86_64(info&0xffffffff) == elf.R_X86_64_JMP_SLOT && info>>32 > 0 && int(info>>32) <= len(syms) && syms[info>>32-1].Name == "malloc" {
				off = binary.LittleEndian.Uint64(data[i:])
			}
		}
	}
	if off == 0 {
		t.Fatalf("%s calls no malloc through its PLT", lib)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var base uint64
	var code [][2]uint64
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		if len(f) == 6 && f[5] == lib && f[2] == "00000000" && base == 0 {
			base = start
		}
		if len(f) == 5 && strings.Contains(f[1], "x") {
			code = append(code, [2]uint64{start, end})
		}
	}
	if base == 0 {
		return false
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var w [8]byte
	if _, err := mem.ReadAt(w[:], int64(base+off)); err != nil {
		return false
	}
	v := binary.LittleEndian.Uint64(w[:])
	for _, r := range code {
		if v >= r[0] && v < r[1] {
			return true
		}
	}
	return false
}

// TestLeaksDlcloseDuringWindow: a library is dlopen'd during the window
// (its GOT is pointed at the sampler by the next rescan), then dlclose'd
// before the window ends. Detaching puts back what is still there, skips
// what went with the library, removes the sampler and prints the profile.
func TestLeaksDlcloseDuringWindow(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2", "-ldl"))
	lib := testutil.BuildC(t, "libleak.c", "-O2", "-shared", "-fPIC")
	cmd := exec.Command(arenactl, "leaks", "--duration", "0", "--rate", "16K", "--json", fmt.Sprint(tg.Pid))
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = out
	var said strings.Builder
	_, stderr := leaksStarted(t, cmd, "the window is open", &said)
	if a := tg.Send("load " + lib); a != "loaded" {
		t.Fatalf("load: %q", a)
	}
	testutil.WaitUntil(t, "the library's GOT to point at the sampler", func() bool { return gotHooked(t, tg.Pid, lib) })
	if a := tg.Send("unload"); a != "unloaded" {
		t.Fatalf("unload: %q", a)
	}
	if maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.Pid)); strings.Contains(string(maps), lib) {
		t.Fatalf("%s is still mapped after dlclose", lib)
	}
	cmd.Process.Signal(syscall.SIGINT)
	code := exitOf(t, cmd)
	doc, _ := os.ReadFile(out.Name())
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr())
	}
	var d leaksDoc
	if err := json.Unmarshal(doc, &d); err != nil || d.Samples == 0 || d.Sampler.Kept != nil {
		t.Errorf("profile: %v, %d samples, kept %+v", err, d.Samples, d.Sampler.Kept)
	}
	if !strings.Contains(stderr(), "unloaded during the window") {
		t.Errorf("arenactl did not say GOT entries went with the library: %s", stderr())
	}
	if m := samplerMapped(t, tg.Pid); len(m) > 0 {
		t.Errorf("the sampler is still mapped: %q", m)
	}
	if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
		t.Fatalf("target: %q", a)
	}
	// Loaded again, the library runs with its own GOT, unhooked.
	if a := tg.Send("load " + lib); a != "loaded" {
		t.Fatalf("load: %q", a)
	}
	if gotHooked(t, tg.Pid, lib) {
		t.Error("the reloaded library's GOT points at a sampler")
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// TestLeaksRefusesBadArguments: a mistyped process id is one, not a core;
// an -o that can never be written is refused with exit 2 before anything
// is placed in the process (it used to fail after the whole window, the
// profile lost), naming the path given and the command that refused it.
func TestLeaksRefusesBadArguments(t *testing.T) {
	for _, arg := range []string{"", "self", "12abc"} {
		r := run(t, "leaks", arg)
		expectRefusal(t, r, exitUsage, "is not a process id")
		if strings.Contains(r.Stderr, "core") {
			t.Errorf("leaks %q: %s", arg, r.Stderr)
		}
	}
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
	pid := fmt.Sprint(tg.Pid)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct{ out, words string }{
		{"/dev/full", "leaks writes its profile to a new file"},
		{"/nonexistent-arenactl/x.pb.gz", "there is no directory /nonexistent-arenactl"},
		{file + "/x.pb.gz", file + " is not a directory"},
		{t.TempDir(), "is a directory"},
	} {
		r := run(t, "leaks", "--duration", "30s", "-o", c.out, pid)
		expectRefusal(t, r, exitUsage, "-o "+c.out, c.words)
		if strings.Contains(r.Stderr, "snapshot") || strings.Contains(r.Stderr, "partial") {
			t.Errorf("-o %s: %s", c.out, r.Stderr)
		}
		if m := samplerMapped(t, tg.Pid); len(m) > 0 {
			t.Fatalf("-o %s: the sampler was placed: %q", c.out, m)
		}
	}
	// A good -o leaves no partial file behind, and one refused run none.
	dir := t.TempDir()
	mustRun(t, "leaks", "--duration", "300ms", "-o", filepath.Join(dir, "heap.pb.gz"), pid)
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "heap.pb.gz" {
		t.Errorf("after leaks -o: %v", ents)
	}
	if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
		t.Fatalf("target: %q", a)
	}
}
