package unwind_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/testutil"
	"github.com/arenactl/arenactl/internal/unwind"
)

// stackMax is how much of a stack the tests copy: enough for the chain
// and a signal frame with its xsave area; the profiler copies 8 KiB.
const stackMax = 64 << 10

// named is a frame with its location.
type named struct {
	unwind.Frame
	symbolize.Location
}

func symbolizeTrace(s *symbolize.Symbolizer, tr unwind.Trace) []named {
	out := make([]named, len(tr.Frames))
	for i, f := range tr.Frames {
		out[i] = named{f, s.Symbolize(f.LookupPC())}
	}
	return out
}

func dump(fs []named, tr unwind.Trace) string {
	var b strings.Builder
	for i, f := range fs {
		fmt.Fprintf(&b, "#%-2d %#x %-28s %s:%d  [%s] exact=%v via=%s\n", i, f.PC, f.Function,
			filepath.Base(f.File), f.Location.Line, filepath.Base(f.Location.Module), f.Exact, f.Method)
	}
	fmt.Fprintf(&b, "stop: %s truncated=%v\n", tr.Stop, tr.Truncated)
	return b.String()
}

// sourceLine is the 1-based line of testdata/unwind/file holding marker.
func sourceLine(t testing.TB, file, marker string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(testutil.RepoRoot(t), "testdata", "unwind", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), marker) {
			return n
		}
	}
	t.Fatalf("%q not in %s", marker, file)
	return 0
}

// indexOf is the first frame named fn at or after from, -1 if none.
func indexOf(fs []named, fn string, from int) int {
	for i := from; i < len(fs); i++ {
		if fs[i].Function == fn {
			return i
		}
	}
	return -1
}

// expectRun checks that the frames from i on are named want, in order.
func expectRun(t *testing.T, fs []named, i int, want []string, ctx string) {
	t.Helper()
	if i < 0 || i+len(want) > len(fs) {
		t.Fatalf("chain %v not found:\n%s", want, ctx)
	}
	for k, w := range want {
		if fs[i+k].Function != w {
			t.Fatalf("frame #%d is %q, want %q (chain %v):\n%s", i+k, fs[i+k].Function, w, want, ctx)
		}
	}
}

var chainVariants = []struct {
	name  string
	flags []string
}{
	{"pie", []string{"-pie", "-fPIE"}},
	{"nopie", []string{"-no-pie", "-fno-pie"}},
	// No .eh_frame for the executable's own code: its CFI is in
	// .debug_frame only.
	{"debugframe", []string{"-fno-exceptions", "-fno-asynchronous-unwind-tables"}},
}

// TestUnwindChain unwinds a thread parked at the end of
// main-less chain_main -> a::runner::run -> b<int>::step -> lib::c ->
// nd::d -> leaf_wait -> read, built -O2 -fomit-frame-pointer, PIE and not,
// with .eh_frame and with .debug_frame only.
func TestUnwindChain(t *testing.T) {
	for _, v := range chainVariants {
		t.Run(v.name, func(t *testing.T) {
			b := buildChain(t, v.name, v.flags...)
			ct := startChain(t, b)
			lt, smp := freezeSample(t, ct.Pid, ct.chainTid, stackMax)
			mods := module.NewTable(lt, b.debugDir)
			defer mods.Close()
			u := unwind.New(mods)
			tr := u.Unwind(smp.regs, smp.stack)
			fs := symbolizeTrace(symbolize.New(mods), tr)
			ctx := dump(fs, tr)
			t.Logf("\n%s", ctx)

			if tr.Stop != unwind.StopEnd || tr.Truncated {
				t.Errorf("stopped with %s, want the outermost frame reached:\n%s", tr.Stop, ctx)
			}
			if !strings.Contains(fs[0].Location.Module, "libc.so") {
				t.Errorf("leaf frame not in libc (the thread is in read):\n%s", ctx)
			}
			i := indexOf(fs, "leaf_wait", 0)
			expectRun(t, fs, i, []string{"leaf_wait", "nd::d", "lib::c", "b<int>::step", "a::runner::run", "chain_main"}, ctx)
			for k := 0; k < i; k++ {
				if !strings.Contains(fs[k].Location.Module, "libc.so") {
					t.Errorf("frame #%d before leaf_wait is not in libc:\n%s", k, ctx)
				}
			}
			// Nothing here has a frame pointer: every step is by CFI.
			for k := i; k < i+6; k++ {
				if fs[k].Method != unwind.MethodCFI {
					t.Errorf("frame #%d unwound by %s, want cfi:\n%s", k, fs[k].Method, ctx)
				}
			}
			// leaf_wait's call of read is in wait_inner, inlined into it.
			readLine, callLine := sourceLine(t, "chain.cpp", "int r = read(fd, &c, 1);"), sourceLine(t, "chain.cpp", "int r = wait_inner(park_fd[0]);")
			if f := fs[i]; filepath.Base(f.File) != "chain.cpp" || f.Location.Line != readLine {
				t.Errorf("leaf_wait's frame at %s:%d, want chain.cpp:%d", f.File, f.Location.Line, readLine)
			}
			if in := fs[i].Inlined; len(in) != 2 ||
				in[0].Function != "wait_inner" || filepath.Base(in[0].File) != "chain.cpp" || in[0].Line != readLine ||
				in[1].Function != "leaf_wait" || filepath.Base(in[1].File) != "chain.cpp" || in[1].Line != callLine {
				t.Errorf("leaf_wait's inline chain is %+v, want wait_inner at chain.cpp:%d in leaf_wait at chain.cpp:%d", in, readLine, callLine)
			}
			// lib::c's line comes from the separate debug file (by build-id
			// under the debug directory); nd::d has none.
			if f := fs[i+2]; filepath.Base(f.File) != "lib_dbg.cpp" || f.Location.Line != sourceLine(t, "lib_dbg.cpp", "int r = nd::d(") {
				t.Errorf("lib::c at %s:%d, want lib_dbg.cpp:%d", f.File, f.Location.Line, sourceLine(t, "lib_dbg.cpp", "int r = nd::d("))
			}
			if f := fs[i+1]; f.File != "" || !strings.HasSuffix(f.Location.Module, "libchain_nodbg.so") {
				t.Errorf("nd::d: file %q module %q, want no file, in libchain_nodbg.so", f.File, f.Location.Module)
			}
			if f := fs[i+3]; f.Mangled != "_ZN1bIiE4stepEi" {
				t.Errorf("b<int>::step's symbol is %q", f.Mangled)
			}
			ct.quit(t)
		})
	}
}

// TestUnwindSignalFrame unwinds a signal handler parked in read() through
// the kernel's signal frame into the code it interrupted: by libc's CFI
// for __restore_rt, and by recognizing its code and reading the
// rt_sigframe when that CFI is taken away.
func TestUnwindSignalFrame(t *testing.T) {
	b := buildChain(t, "pie", chainVariants[0].flags...)
	ct := startChain(t, b)
	if got := ct.Send("signal"); got != "handling" {
		t.Fatalf("signal: %q", got)
	}
	lt, smp := freezeSample(t, ct.Pid, ct.sigTid, stackMax)
	var trampoline uint64 // where the CFI run found __restore_rt
	for _, byCode := range []bool{false, true} {
		name := "cfi"
		if byCode {
			name = "by-code"
		}
		t.Run(name, func(t *testing.T) {
			mods := module.NewTable(lt, b.debugDir)
			defer mods.Close()
			sym := symbolize.New(mods)
			u := unwind.New(mods)
			if byCode {
				if trampoline == 0 {
					t.Skip("the CFI run found no trampoline")
				}
				unwind.IgnoreCFI(u, func(m *module.Module, vaddr uint64) bool {
					return m.Bias+vaddr+1 >= trampoline && m.Bias+vaddr < trampoline+16
				})
			}
			tr := u.Unwind(smp.regs, smp.stack)
			fs := symbolizeTrace(sym, tr)
			ctx := dump(fs, tr)
			t.Logf("\n%s", ctx)
			if tr.Stop != unwind.StopEnd {
				t.Errorf("stopped with %s:\n%s", tr.Stop, ctx)
			}
			i := indexOf(fs, "handler_park", 0)
			expectRun(t, fs, i, []string{"handler_park", "on_signal"}, ctx)
			sig := i + 2
			if sig >= len(fs) || fs[sig].Method != unwind.MethodSignal || !strings.Contains(fs[sig].Location.Module, "libc.so") {
				t.Fatalf("frame #%d is not libc's signal trampoline:\n%s", sig, ctx)
			}
			trampoline = fs[sig].PC
			// Its name is in libc's .symtab, which Debian strips into
			// libc6-dbg's debug file.
			if _, debug := fs[sig].Frame.Module.Debug(); debug != "" && fs[sig].Function != "__restore_rt" {
				t.Errorf("the trampoline is named %q", fs[sig].Function)
			}
			if !fs[sig+1].Exact {
				t.Errorf("the interrupted frame #%d is not marked exact:\n%s", sig+1, ctx)
			}
			j := indexOf(fs, "sig_wait", sig+1)
			expectRun(t, fs, j, []string{"sig_wait", "sig_main"}, ctx)
			for k := sig + 1; k < j; k++ {
				if !strings.Contains(fs[k].Location.Module, "libc.so") {
					t.Errorf("interrupted frame #%d is not in libc:\n%s", k, ctx)
				}
			}
		})
	}
	ct.quit(t)
}

// TestUnwindAtEntry is the profiler's case: the sample is taken at a
// function's first instruction (malloc's), called from leaf_wait; and the
// same at the vDSO's clock_gettime, whose image is read from memory. The
// stack is the parked thread's, with a return address into leaf_wait
// pushed where the call would have pushed it (in the copy only; the
// target is not touched).
func TestUnwindAtEntry(t *testing.T) {
	b := buildChain(t, "pie", chainVariants[0].flags...)
	ct := startChain(t, b)
	lt, smp := freezeSample(t, ct.Pid, ct.chainTid, stackMax)
	mods := module.NewTable(lt, b.debugDir)
	defer mods.Close()
	u := unwind.New(mods)
	sym := symbolize.New(mods)
	full := symbolizeTrace(sym, u.Unwind(smp.regs, smp.stack))
	i := indexOf(full, "leaf_wait", 0)
	if i < 1 {
		t.Fatal("leaf_wait not unwound from the parked thread")
	}
	ret, sp := full[i].PC, full[i].SP // read's return into leaf_wait, and the stack there
	off := sp - smp.stack.Addr
	data := make([]byte, 8+len(smp.stack.Data)-int(off))
	binary.LittleEndian.PutUint64(data, ret)
	copy(data[8:], smp.stack.Data[off:])
	for _, c := range []struct {
		name, module, symbol, want string
		noCFI                      bool
	}{
		{"malloc", "libc.so", "malloc", "malloc", false},
		// As if libc had no CFI for malloc: Start.AtEntry decides.
		{"malloc-no-cfi", "libc.so", "malloc", "malloc", true},
		{"vdso", module.VDSO, "__vdso_clock_gettime", "clock_gettime", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			regs := smp.regs
			entry, err := mods.DynamicSymbol(c.module, c.symbol)
			if err != nil {
				t.Fatal(err)
			}
			regs.Regs.SetPCOf(host, entry)
			regs.Regs.SetSPOf(host, sp-8)
			regs.AtEntry = true
			u := unwind.New(mods)
			want := unwind.MethodCFI
			if c.noCFI {
				unwind.IgnoreCFI(u, func(m *module.Module, vaddr uint64) bool { return m.Bias+vaddr == regs.Regs.PCOf(host) })
				want = unwind.MethodEntry
			}
			tr := u.Unwind(regs, unwind.Stack{Addr: sp - 8, Data: data})
			fs := symbolizeTrace(sym, tr)
			ctx := dump(fs, tr)
			t.Logf("\n%s", ctx)
			expectRun(t, fs, 0, []string{c.want, "leaf_wait", "nd::d", "lib::c", "b<int>::step", "a::runner::run", "chain_main"}, ctx)
			if !fs[0].Exact || fs[0].Method != want {
				t.Errorf("%s's frame: exact %v via %s, want via %s", c.want, fs[0].Exact, fs[0].Method, want)
			}
			if tr.Stop != unwind.StopEnd {
				t.Errorf("stopped with %s", tr.Stop)
			}
		})
	}
	ct.quit(t)
}

var _ = live.IsGone

// TestUnwindWithoutCFI: nd::d is built with no CFI at all
// (-fno-asynchronous-unwind-tables -fno-exceptions, no -g). With a frame
// pointer the walk follows rbp through it and carries on by CFI; without
// one it stops there (or wherever rbp leads, never past MaxFrames), and
// the frames up to it are right either way.
func TestUnwindWithoutCFI(t *testing.T) {
	noCFI := []string{"-fno-asynchronous-unwind-tables", "-fno-exceptions"}
	for _, v := range []struct {
		name string
		fp   bool
	}{{"framepointer", true}, {"nothing", false}} {
		t.Run(v.name, func(t *testing.T) {
			flags := append([]string{}, noCFI...)
			if v.fp {
				flags = append(flags, "-fno-omit-frame-pointer")
			}
			b := buildChainLib(t, "nocfi-"+v.name, flags, chainVariants[0].flags...)
			ct := startChain(t, b)
			lt, smp := freezeSample(t, ct.Pid, ct.chainTid, stackMax)
			mods := module.NewTable(lt, b.debugDir)
			defer mods.Close()
			tr := unwind.New(mods).Unwind(smp.regs, smp.stack)
			fs := symbolizeTrace(symbolize.New(mods), tr)
			ctx := dump(fs, tr)
			t.Logf("\n%s", ctx)
			i := indexOf(fs, "leaf_wait", 0)
			if v.fp {
				expectRun(t, fs, i, []string{"leaf_wait", "nd::d", "lib::c", "b<int>::step", "a::runner::run", "chain_main"}, ctx)
				if fs[i+1].Method != unwind.MethodFramePointer {
					t.Errorf("nd::d unwound by %s, want fp", fs[i+1].Method)
				}
				if tr.Stop != unwind.StopEnd {
					t.Errorf("stopped with %s", tr.Stop)
				}
			} else {
				expectRun(t, fs, i, []string{"leaf_wait", "nd::d"}, ctx)
				if fs[i+1].Method == unwind.MethodCFI {
					t.Errorf("nd::d unwound by CFI it does not have")
				}
			}
			ct.quit(t)
		})
	}
}

// TestUnwindAtPLTEntry samples at the first instruction of the PLT stub
// leaf_wait calls read through (as a sample taken by a hook reached
// through the PLT would look), by ld's CFI for the PLT and, with that
// taken away, by the PLT fallback.
func TestUnwindAtPLTEntry(t *testing.T) {
	b := buildChain(t, "pie", chainVariants[0].flags...)
	ct := startChain(t, b)
	lt, smp := freezeSample(t, ct.Pid, ct.chainTid, stackMax)
	mods := module.NewTable(lt, b.debugDir)
	defer mods.Close()
	sym := symbolize.New(mods)
	full := symbolizeTrace(sym, unwind.New(mods).Unwind(smp.regs, smp.stack))
	i := indexOf(full, "leaf_wait", 0)
	if i < 1 {
		t.Fatal("leaf_wait not unwound from the parked thread")
	}
	ret, sp := full[i].PC, full[i].SP
	exe := full[i].Frame.Module
	var call [5]byte
	if err := exe.ReadVaddr(call[:], ret-5-exe.Bias); err != nil || call[0] != 0xe8 {
		t.Fatalf("no direct call before leaf_wait's return address: % x %v", call, err)
	}
	plt := ret + uint64(int64(int32(binary.LittleEndian.Uint32(call[1:]))))
	off := sp - smp.stack.Addr
	data := make([]byte, 8+len(smp.stack.Data)-int(off))
	binary.LittleEndian.PutUint64(data, ret)
	copy(data[8:], smp.stack.Data[off:])
	regs := smp.regs
	regs.Regs.SetPCOf(host, plt)
	regs.Regs.SetSPOf(host, sp-8)
	for _, fallback := range []bool{false, true} {
		name := map[bool]string{false: "cfi", true: "fallback"}[fallback]
		t.Run(name, func(t *testing.T) {
			u := unwind.New(mods)
			if fallback {
				unwind.IgnoreCFI(u, func(m *module.Module, vaddr uint64) bool { return m == exe && m.Bias+vaddr == plt })
			}
			tr := u.Unwind(regs, unwind.Stack{Addr: sp - 8, Data: data})
			fs := symbolizeTrace(sym, tr)
			ctx := dump(fs, tr)
			t.Logf("PLT stub at %#x\n%s", plt, ctx)
			if fs[0].Frame.Module != exe || fs[0].PC != plt || fs[0].Function != "read@plt" {
				t.Fatalf("frame #0 is not the PLT stub read@plt:\n%s", ctx)
			}
			want := unwind.MethodCFI
			if fallback {
				want = unwind.MethodPLT
			}
			if fs[0].Method != want {
				t.Errorf("the stub unwound by %s, want %s", fs[0].Method, want)
			}
			expectRun(t, fs, 1, []string{"leaf_wait", "nd::d", "lib::c", "b<int>::step", "a::runner::run", "chain_main"}, ctx)
		})
	}
	ct.quit(t)
}

// TestUnwindMatchesGDB compares the parked chain, inline frames expanded,
// with gdb's bt of the same thread (gdb attaches after our freeze is
// thawed; the thread has not moved).
func TestUnwindMatchesGDB(t *testing.T) {
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		t.Skip("gdb is not installed")
	}
	b := buildChain(t, "pie", chainVariants[0].flags...)
	ct := startChain(t, b)
	lt, smp := freezeSample(t, ct.Pid, ct.chainTid, stackMax)
	mods := module.NewTable(lt, b.debugDir)
	defer mods.Close()
	tr := unwind.New(mods).Unwind(smp.regs, smp.stack)
	var ours []string
	for _, f := range symbolizeTrace(symbolize.New(mods), tr) {
		if len(f.Inlined) > 0 {
			for _, in := range f.Inlined {
				ours = append(ours, in.Function)
			}
			continue
		}
		ours = append(ours, f.Function)
	}
	lt.Close() // gdb cannot attach while we trace the process
	out, err := exec.Command(gdb, "-batch", "-nx", "-p", strconv.Itoa(ct.Pid),
		"-ex", "set debug-file-directory /usr/lib/debug:"+b.debugDir,
		"-ex", "thread apply all bt").CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	theirs := gdbChain(string(out), ct.chainTid)
	t.Logf("ours: %v\ngdb:  %v", ours, theirs)
	from := func(fs []string, name string) []string {
		for i, f := range fs {
			if f == name {
				return fs[i:]
			}
		}
		return nil
	}
	// From our executable's first frame on (gdb names libc's frames by
	// its own alias choice: __GI___libc_read for read).
	o, g := from(ours, "wait_inner"), from(theirs, "wait_inner")
	if len(o) == 0 || len(g) == 0 {
		t.Fatalf("wait_inner missing: ours %v, gdb %v", ours, theirs)
	}
	for i := 0; i < len(g) && i < len(o); i++ {
		if strings.Contains(g[i], "clone") && strings.Contains(o[i], "clone") {
			break
		}
		if g[i] != o[i] {
			t.Errorf("frame %d from wait_inner: ours %q, gdb %q", i, o[i], g[i])
		}
	}
	if len(o) != len(g) {
		t.Errorf("from wait_inner: %d frames here, %d in gdb", len(o), len(g))
	}
	ct.quit(t)
}

// gdbFrame is one line of gdb's bt: "#3  0x... in nd::d(int, int (*)(int)) () from ..."
// or "#0  wait_inner (fd=...) at ...".
var gdbFrame = regexp.MustCompile(`^#\d+\s+(?:0x[0-9a-f]+ in )?(.+?) \(`)

// gdbChain extracts the function names of thread tid's backtrace, without
// parameter lists.
func gdbChain(out string, tid int) []string {
	var names []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Thread ") {
			in = strings.Contains(l, fmt.Sprintf("LWP %d)", tid))
			continue
		}
		if !in {
			continue
		}
		if m := gdbFrame.FindStringSubmatch(l); m != nil {
			name := m[1]
			if i := strings.Index(name, "("); i > 0 { // "nd::d(int, int (*)(int))"
				name = name[:i]
			}
			names = append(names, name)
		}
	}
	return names
}
