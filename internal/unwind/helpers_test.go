package unwind_test

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/testutil"
	"github.com/arenactl/arenactl/internal/unwind"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// host is the machine of the test programs these tests build and run.
var host = arch.Host()

// setReg stores v as DWARF register n in r, at the word of pr_reg a keeps
// it in.
func setReg(r *debuggee.Regs, a *arch.Arch, n int, v uint64) {
	for i, w := range a.Prstatus.Words {
		if w == n {
			r[i] = v
		}
	}
}

// chainBuild is testdata/unwind built one way: the executable, its two
// libraries, and the directory holding the library's separate debug file.
type chainBuild struct {
	exe, debugDir string
}

var (
	buildMu sync.Mutex
	builds  = map[string]chainBuild{}
)

func gxx(t testing.TB, args ...string) {
	t.Helper()
	if b, err := exec.Command("g++", args...).CombinedOutput(); err != nil {
		t.Fatalf("g++ %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// buildChain compiles testdata/unwind with g++ -O2 -fomit-frame-pointer:
// the executable with exeFlags (-pie or -no-pie, ...) and -g; libchain_dbg.so
// with -g, its DWARF then moved to DIR/.build-id/xx/rest.debug and stripped
// from it (found as addr2line finds Debian's -dbgsym files);
// libchain_nodbg.so without -g.
func buildChain(t testing.TB, name string, exeFlags ...string) chainBuild {
	t.Helper()
	return buildChainLib(t, name, nil, exeFlags...)
}

// buildChainLib is buildChain with extra flags for libchain_nodbg.so.
func buildChainLib(t testing.TB, name string, libFlags []string, exeFlags ...string) chainBuild {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		t.Skip("g++ is not installed")
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := builds[name]; ok {
		return b
	}
	src := filepath.Join(testutil.RepoRoot(t), "testdata", "unwind")
	dir, err := os.MkdirTemp(testutil.Dir(t), "unwind-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"-O2", "-fomit-frame-pointer", "-Wl,--build-id"}
	nodbg := filepath.Join(dir, "libchain_nodbg.so")
	gxx(t, append(append(common, libFlags...), "-shared", "-fPIC", "-o", nodbg, filepath.Join(src, "lib_nodbg.cpp"))...)
	dbg := filepath.Join(dir, "libchain_dbg.so")
	gxx(t, append(common, "-g", "-shared", "-fPIC", "-o", dbg, filepath.Join(src, "lib_dbg.cpp"),
		"-L"+dir, "-lchain_nodbg", "-Wl,-rpath,"+dir)...)
	debugDir := filepath.Join(dir, "debug")
	id := fileBuildID(t, dbg)
	debugFile := filepath.Join(debugDir, ".build-id", id[:2], id[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(debugFile), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"objcopy", "--only-keep-debug", dbg, debugFile},
		{"objcopy", "--strip-debug", dbg},
	} {
		if b, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, b)
		}
	}
	exe := filepath.Join(dir, "chain")
	gxx(t, append(append(common, "-g", "-pthread"), append(exeFlags, "-o", exe, filepath.Join(src, "chain.cpp"),
		"-L"+dir, "-lchain_dbg", "-lchain_nodbg", "-Wl,-rpath,"+dir)...)...)
	b := chainBuild{exe: exe, debugDir: debugDir}
	builds[name] = b
	return b
}

func fileBuildID(t testing.TB, path string) string {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	id := module.BuildIDOf(ef)
	if len(id) < 4 {
		t.Fatalf("%s has no build-id", path)
	}
	return id
}

// chainTarget is the chain program running.
type chainTarget struct {
	*testutil.Target
	chainTid, sigTid int
}

func startChain(t testing.TB, b chainBuild) *chainTarget {
	t.Helper()
	return startChainCmd(t, exec.Command(b.exe))
}

func startChainCmd(t testing.TB, cmd *exec.Cmd) *chainTarget {
	t.Helper()
	tg := testutil.StartCmd(t, cmd)
	ct := &chainTarget{Target: tg}
	for _, f := range strings.Fields(tg.Ready())[1:] {
		k, v, _ := strings.Cut(f, "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "chain":
			ct.chainTid = n
		case "sig":
			ct.sigTid = n
		}
	}
	if ct.chainTid == 0 || ct.sigTid == 0 {
		t.Fatalf("ready line %q", tg.Ready())
	}
	return ct
}

// sample is one frozen thread's registers and a copy of its stack from sp
// up, at most max bytes and no further than its stack mapping's end: what
// the profiler's sampled call will hand the unwinder.
type sample struct {
	regs  unwind.Start
	stack unwind.Stack
}

// freezeSample opens pid, freezes it, and takes a sample of thread tid.
// The caller gets the opened target (for the module table) and closes it.
func freezeSample(t testing.TB, pid, tid, max int) (*live.Target, sample) {
	t.Helper()
	lt, err := live.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lt.Close() })
	fr, err := lt.Freeze(context.Background(), testutil.Patience)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Thaw()
	for _, th := range fr.Threads() {
		if th.Tid != tid {
			continue
		}
		regs := unwind.Start{Regs: th.Regs, HaveCalleeSaved: true}
		return lt, sample{regs: regs, stack: copyStack(t, lt, th.SP(), max)}
	}
	t.Fatalf("thread %d not among the frozen ones", tid)
	return nil, sample{}
}

func copyStack(t testing.TB, lt *live.Target, sp uint64, max int) unwind.Stack {
	t.Helper()
	var stack maps.Mapping
	for _, m := range lt.Mappings() {
		if m.Contains(sp) {
			stack = m
		}
	}
	if stack.End == 0 {
		t.Fatalf("sp %#x is in no mapping", sp)
	}
	n := int(stack.End - sp)
	if n > max {
		n = max
	}
	buf := make([]byte, n)
	if _, err := lt.ReadAt(buf, sp); err != nil {
		t.Fatalf("reading the stack at %#x: %v", sp, err)
	}
	return unwind.Stack{Addr: sp, Data: buf, End: stack.End}
}

// quit checks that the target, frozen and thawed by the test, still
// answers and exits cleanly.
func (ct *chainTarget) quit(t testing.TB) {
	t.Helper()
	if last, code := ct.Quit(); last != "bye" || code != 0 {
		t.Errorf("target after the test: said %q, exit %d", last, code)
	}
}
