package stackprof_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/testutil"
	"github.com/arenactl/arenactl/internal/unwind"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// sampleStack is what the sampler copies of a stack at each sampled call.
const sampleStack = 8 << 10

// sites is testdata/stackprof/sites running, frozen once, with what the
// sampler would have taken at each site's allocator entry.
type sites struct {
	exe    string
	tg     *testutil.Target
	lt     *live.Target
	mods   *module.Table
	u      *unwind.Unwinder
	s      *symbolize.Symbolizer
	widget stackprof.Raw // at operator new, called from make_widget
	buffer stackprof.Raw // at realloc, called from grow_buffer
	// The widget's call without the allocator's entry.
	widgetCall stackprof.Call
}

// startSites builds and runs the target, freezes it, and makes of each
// parked thread's registers and stack the sample the sampler takes at the
// allocator's entry: the thread is parked in park(), called right before
// the allocation on the same source line; the frame that called park is
// unwound, its return address pushed below its stack pointer as the
// allocator's call would have, and pc set to the allocator's first
// instruction. Only the copy is changed, never the target.
func startSites(t *testing.T) *sites {
	t.Helper()
	exe := testutil.BuildCWith(t, "g++", "stackprof/sites.cpp", "-O2", "-fomit-frame-pointer", "-pie", "-fPIE",
		"-pthread", "-Wl,--build-id")
	tg := testutil.Start(t, exe)
	tids := map[string]int{}
	for _, f := range strings.Fields(tg.Ready())[1:] {
		k, v, _ := strings.Cut(f, "=")
		tids[k], _ = strconv.Atoi(v)
	}
	lt, err := live.Open(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	st := &sites{exe: exe, tg: tg, lt: lt}
	t.Cleanup(func() {
		if st.mods != nil {
			st.mods.Close()
		}
		lt.Close()
		if last, code := tg.Quit(); last != "bye" || code != 0 {
			t.Errorf("target after the test: said %q, exit %d", last, code)
		}
	})
	fr, err := lt.Freeze(context.Background(), testutil.Patience)
	if err != nil {
		t.Fatal(err)
	}
	parked := map[int]unwind.Start{}
	for _, th := range fr.Threads() {
		parked[th.Tid] = unwind.Start{Regs: th.Regs, HaveCalleeSaved: true}
	}
	stacks := map[int]unwind.Stack{}
	for _, tid := range tids {
		regs, ok := parked[tid]
		if !ok {
			fr.Thaw()
			t.Fatalf("thread %d not among the frozen ones", tid)
		}
		stacks[tid] = copyStack(t, lt, regs.Regs.SPOf(arch.Host()), 64<<10)
	}
	fr.Thaw()
	st.mods = module.NewTable(lt)
	st.u, st.s = unwind.New(st.mods), symbolize.New(st.mods)
	st.widget = st.atEntry(t, parked[tids["widget"]], stacks[tids["widget"]], "make_widget", "libstdc++", "_Znwm", "new")
	st.widgetCall = st.call(t, parked[tids["widget"]], stacks[tids["widget"]], "make_widget")
	st.buffer = st.atEntry(t, parked[tids["buffer"]], stacks[tids["buffer"]], "grow_buffer", "libc.so", "realloc", "realloc")
	return st
}

func (st *sites) atEntry(t *testing.T, regs unwind.Start, stack unwind.Stack, caller, lib, symbol, kind string) stackprof.Raw {
	t.Helper()
	c := st.call(t, regs, stack, caller)
	entry, err := st.mods.DynamicSymbol(lib, symbol)
	if err != nil {
		t.Fatal(err)
	}
	c.Entry = entry
	r := stackprof.Raw{Kind: kind}
	r.Start, r.Stack = c.Unwind()
	// What the callee-saved registers held at the call is not known from
	// the parked thread: only pc and sp are.
	r.Start.HaveCalleeSaved = false
	return r
}

// call is the sampled call the hook would see if caller's call of park
// were a call of the allocator: its return address and stack from the
// caller's sp, a copy as long as the sampler's.
func (st *sites) call(t *testing.T, regs unwind.Start, stack unwind.Stack, caller string) stackprof.Call {
	t.Helper()
	tr := st.u.Unwind(regs, stack)
	for _, f := range tr.Frames {
		if st.s.Symbolize(f.LookupPC()).Function != caller {
			continue
		}
		off := f.SP - stack.Addr
		var r debuggee.Regs
		r.SetPCOf(arch.Host(), f.PC)
		r.SetSPOf(arch.Host(), f.SP)
		return stackprof.Call{Regs: r, Stack: stack.Data[off:min(len(stack.Data), int(off)+sampleStack)], StackEnd: stack.End}
	}
	t.Fatalf("no frame of %s in the parked thread's stack", caller)
	return stackprof.Call{}
}

func copyStack(t *testing.T, lt *live.Target, sp uint64, max int) unwind.Stack {
	t.Helper()
	for _, m := range lt.Mappings() {
		if !m.Contains(sp) {
			continue
		}
		buf := make([]byte, min(int(m.End-sp), max))
		if _, err := lt.ReadAt(buf, sp); err != nil {
			t.Fatalf("reading the stack at %#x: %v", sp, err)
		}
		return unwind.Stack{Addr: sp, Data: buf, End: m.End}
	}
	t.Fatalf("sp %#x is in no mapping", sp)
	return unwind.Stack{}
}

// sourceLine is the 1-based line of testdata/stackprof/sites.cpp holding
// marker.
func sourceLine(t *testing.T, marker string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(testutil.RepoRoot(t), "testdata", "stackprof", "sites.cpp"))
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
	t.Fatalf("%q not in sites.cpp", marker)
	return 0
}

// with is r with an address and size, as the sampler fills them.
func with(r stackprof.Raw, addr, size uint64) stackprof.Raw {
	r.Addr, r.Size = addr, size
	return r
}

// The profile most codec tests read: the two sites with known samples
// (see realProfile), built once per test binary.
var (
	fixtureOnce sync.Once
	fixture     *stackprof.Profile
	fixtureExe  string
)

// fixtureRate is its mean sampling interval: jemalloc's and Go's default.
const fixtureRate = 512 << 10

// realProfile is the profile of three widgets of 104 bytes (one freed)
// and two 64 KiB buffers (both held), sampled at 512 KiB, over 10 s.
func realProfile(t *testing.T) *stackprof.Profile {
	t.Helper()
	fixtureOnce.Do(func() {
		st := startSites(t)
		raws := fixtureRaws(st)
		fixture = stackprof.Build(raws, fixtureWindow, st.u, st.s)
		fixtureExe = st.exe
	})
	if fixture == nil {
		t.Fatal("the shared profile could not be built (see the first test that asked for it)")
	}
	return fixture
}

var fixtureWindow = stackprof.Window{Start: time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC), Duration: 10 * time.Second, Rate: fixtureRate}

func fixtureRaws(st *sites) []stackprof.Raw {
	freed := with(st.widget, 0x5000, 104)
	freed.Freed, freed.FreedAt = true, 2*time.Second
	return []stackprof.Raw{
		with(st.widget, 0x1000, 104), with(st.widget, 0x2000, 104), freed,
		with(st.buffer, 0x10000, 64<<10), with(st.buffer, 0x30000, 64<<10),
	}
}

// siteNames is a site's frame names, root first.
func siteNames(s *stackprof.Site) []string {
	var out []string
	for _, f := range s.Frames {
		out = append(out, f.Name())
	}
	return out
}
