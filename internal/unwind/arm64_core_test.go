package unwind_test

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/testutil"
	"github.com/arenactl/arenactl/internal/unwind"
)

// The committed aarch64 kernel cores (testdata/cores/arm64: glibc 2.36,
// Debian 12 arm64, at 4 and 16 KiB pages) have every thread parked where
// the target's code puts it; unwinding each thread from its NT_PRSTATUS
// with the CFI of the fixtures' sysroot (libc's .eh_frame; the targets'
// own) gives the chain the source says, from the parking function out to
// the outermost frame: _start for the main thread, glibc 2.36's clone3
// thread_start for the others. arenas.c's -O1 build inlines park into
// run, heapobjs.cpp's -O2 one park into each thread function.
var arm64Chains = map[string][][]string{
	"arenas": {
		// main: "crash" → freeze → raise(SIGABRT).
		{"__pthread_kill_implementation", "raise", "freeze", "main", "__libc_start_call_main", "__libc_start_main", "_start"},
		// worker 0 parks in nanosleep, worker 1 in poll.
		{"clock_nanosleep", "nanosleep", "run", "start_thread", "thread_start"},
		{"poll", "run", "start_thread", "thread_start"},
	},
	"heapobjs": {
		// main waits in fgets for the next command.
		{"read", "_IO_file_underflow", "_IO_default_uflow", "_IO_getline_info", "fgets", "main", "__libc_start_call_main", "__libc_start_main", "_start"},
		{"read", "stack_thread", "start_thread", "thread_start"},
		{"read", "tls_thread", "start_thread", "thread_start"},
		{"read", "pin_thread", "start_thread", "thread_start"},
		// spins in its own loop, never calling.
		{"register_thread", "start_thread", "thread_start"},
	},
}

var arm64Cores = []string{"2.36-kernel", "2.36-16k-kernel"}

// arm64Core is one fixture opened with its sysroot and libc's debug file.
type arm64Core struct {
	tg   *core.Target
	mods *module.Table
	sym  *symbolize.Symbolizer
}

func openARM64Core(t *testing.T, name string) *arm64Core {
	t.Helper()
	dir := filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arm64")
	sysroot := filepath.Join(dir, "sysroot")
	tg, err := core.OpenTarget(filepath.Join(dir, name+".core.zst"), sysroot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	if tg.Arch() != arch.ARM64 {
		t.Fatalf("%s: a core of %s", name, tg.Arch())
	}
	mods := module.NewTable(tg, filepath.Join(sysroot, "usr", "lib", "debug"))
	t.Cleanup(mods.Close)
	return &arm64Core{tg: tg, mods: mods, sym: symbolize.New(mods)}
}

// start is a thread's registers and its stack from sp to the end of its
// mapping, as the core holds them.
func (c *arm64Core) start(t *testing.T, th debuggee.Thread) (unwind.Start, unwind.Stack) {
	t.Helper()
	sp := th.SP()
	var end uint64
	for _, m := range c.tg.Mappings() {
		if m.Start <= sp && sp < m.End {
			end = m.End
		}
	}
	if end == 0 || end-sp > 1<<20 {
		t.Fatalf("thread %d: sp %#x in no stack-like mapping (end %#x)", th.Tid, sp, end)
	}
	buf := make([]byte, end-sp)
	n, _ := c.tg.ReadAt(buf, sp)
	if n <= 0 {
		t.Fatalf("thread %d: nothing at sp %#x", th.Tid, sp)
	}
	return unwind.Start{Regs: th.Regs, HaveCalleeSaved: true}, unwind.Stack{Addr: sp, Data: buf[:n], End: end}
}

func (c *arm64Core) names(tr unwind.Trace) []string {
	out := make([]string, len(tr.Frames))
	for i, f := range tr.Frames {
		out[i] = c.sym.Symbolize(f.LookupPC()).Function
	}
	return out
}

func TestAArch64CoreChains(t *testing.T) {
	for _, pages := range arm64Cores {
		for prog, chains := range arm64Chains {
			t.Run(prog+"-"+pages, func(t *testing.T) {
				c := openARM64Core(t, prog+"-"+pages)
				u := unwind.New(c.mods)
				seen := map[int]int{}
				threads := c.tg.Threads()
				for _, th := range threads {
					tr := u.Unwind(c.start(t, th))
					got := c.names(tr)
					k := slices.IndexFunc(chains, func(w []string) bool { return slices.Equal(w, got) })
					if k < 0 {
						t.Errorf("thread %d: chain %v (stop %s), not one of %v", th.Tid, got, tr.Stop, chains)
						continue
					}
					seen[k]++
					if tr.Stop != unwind.StopEnd || tr.Truncated {
						t.Errorf("thread %d: stopped with %s", th.Tid, tr.Stop)
					}
					for i, f := range tr.Frames[:len(tr.Frames)-1] {
						if f.Method != unwind.MethodCFI || f.Exact != (i == 0) {
							t.Errorf("thread %d frame %d (%s): method %s exact %v, want cfi and only the leaf exact", th.Tid, i, got[i], f.Method, f.Exact)
						}
					}
				}
				if len(seen) != len(chains) || len(threads) != len(chains) {
					t.Errorf("%d threads gave %d of the %d chains: %v", len(threads), len(seen), len(chains), seen)
				}
			})
		}
	}
}

// TestAArch64CoreSignedReturnAddresses: code built with
// -mbranch-protection=pac-ret signs x30 (paciasp) before saving it, so the
// return addresses on the stack and in x30 carry a pointer authentication
// code above the 48 address bits. Debian 12's arm64 glibc and the
// fixtures' targets are not built so: here every return address of each
// thread's chain, on its stack copy and in x30, is given a code, as
// signing would, and the unwinder must give the same chain.
func TestAArch64CoreSignedReturnAddresses(t *testing.T) {
	for _, pages := range arm64Cores {
		for prog := range arm64Chains {
			t.Run(prog+"-"+pages, func(t *testing.T) {
				c := openARM64Core(t, prog+"-"+pages)
				u := unwind.New(c.mods)
				for _, th := range c.tg.Threads() {
					start, stack := c.start(t, th)
					want := u.Unwind(start, stack)
					ret := map[uint64]bool{}
					for _, f := range want.Frames[1:] {
						ret[f.PC] = true
					}
					signed := 0
					pac := func(p uint64) uint64 {
						signed++
						// bits 48..54 and 56..63: bit 55 says which half
						// of the address space, 0 for a user one.
						return p | (0x5a3c_0000_0000_0000^uint64(signed)<<49)&^(1<<55)
					}
					data := slices.Clone(stack.Data)
					for i := 0; i+8 <= len(data); i += 8 {
						if w := binary.LittleEndian.Uint64(data[i:]); ret[w] {
							binary.LittleEndian.PutUint64(data[i:], pac(w))
						}
					}
					lr := -1
					for i, n := range arch.ARM64.Prstatus.Words {
						if n == arch.ARM64LR {
							lr = i
						}
					}
					if ret[start.Regs[lr]] {
						start.Regs[lr] = pac(start.Regs[lr])
					}
					if signed < len(want.Frames)-1 {
						t.Fatalf("thread %d: signed %d return addresses of a chain of %d", th.Tid, signed, len(want.Frames))
					}
					stack.Data = data
					got := u.Unwind(start, stack)
					if len(got.Frames) != len(want.Frames) || got.Stop != want.Stop {
						t.Fatalf("thread %d: signed, %v (%s); unsigned, %v (%s)", th.Tid, c.names(got), got.Stop, c.names(want), want.Stop)
					}
					for i := range got.Frames {
						if got.Frames[i].PC != want.Frames[i].PC || got.Frames[i].SP != want.Frames[i].SP {
							t.Errorf("thread %d frame %d: pc %#x sp %#x signed, %#x %#x unsigned", th.Tid, i, got.Frames[i].PC, got.Frames[i].SP, want.Frames[i].PC, want.Frames[i].SP)
						}
					}
				}
			})
		}
	}
}

// TestAArch64CoreFallbacks unwinds the cores' threads as if no module had
// CFI: the x29 chain of AAPCS64 frame records ([x29] the caller's x29,
// [x29+8] the return address; every function of Debian's arm64 glibc and
// of the targets sets one up) gives the same functions, up to the
// outermost frame, whose x29 is 0. And a leaf at a function's first
// instruction (the heap profiler's sample at malloc's entry) has its
// return address in x30, not on the stack: with malloc's CFI or without it
// (Start.AtEntry), the step to its caller takes x30.
func TestAArch64CoreFallbacks(t *testing.T) {
	lr := slices.Index(arch.ARM64.Prstatus.Words, arch.ARM64LR)
	for _, pages := range arm64Cores {
		for prog := range arm64Chains {
			t.Run(prog+"-"+pages, func(t *testing.T) {
				c := openARM64Core(t, prog+"-"+pages)
				cfi := unwind.New(c.mods)
				fp := unwind.New(c.mods)
				unwind.IgnoreCFI(fp, func(*module.Module, uint64) bool { return true })
				malloc, err := c.mods.DynamicSymbol("libc.so.6", "malloc")
				if err != nil {
					t.Fatal(err)
				}
				noMalloc := unwind.New(c.mods)
				unwind.IgnoreCFI(noMalloc, func(m *module.Module, vaddr uint64) bool { return m.Bias+vaddr == malloc })
				for _, th := range c.tg.Threads() {
					start, stack := c.start(t, th)
					ref := cfi.Unwind(start, stack)
					want := c.names(ref)

					tr := fp.Unwind(start, stack)
					if got := c.names(tr); !slices.Equal(got, want) || tr.Stop != unwind.StopNoCFI {
						t.Errorf("thread %d without CFI: %v (%s), want %v (no CFI at the end)", th.Tid, got, tr.Stop, want)
					}
					for i, f := range tr.Frames[:len(tr.Frames)-1] {
						if f.Method != unwind.MethodFramePointer || f.PC != ref.Frames[i].PC {
							t.Errorf("thread %d frame %d without CFI: pc %#x by %s, want %#x by fp", th.Tid, i, f.PC, f.Method, ref.Frames[i].PC)
						}
					}

					// As if the thread had just called malloc from where
					// it is.
					at := start
					at.Regs[lr] = th.PC()
					at.Regs.SetPCOf(arch.ARM64, malloc)
					at.AtEntry = true
					for u, method := range map[*unwind.Unwinder]unwind.Method{cfi: unwind.MethodCFI, noMalloc: unwind.MethodEntry} {
						tr := u.Unwind(at, stack)
						got := c.names(tr)
						if !slices.Equal(got, append([]string{"malloc"}, want...)) || tr.Frames[0].Method != method || tr.Frames[1].SP != th.SP() || tr.Stop != ref.Stop {
							t.Errorf("thread %d at malloc's entry: %v (%s, leaf by %s), want malloc then %v (leaf by %s)", th.Tid, got, tr.Stop, tr.Frames[0].Method, want, method)
						}
					}
				}
			})
		}
	}
}

// TestAArch64CoreSignalFrame: a handler returns into the vDSO's
// __kernel_rt_sigreturn, with the kernel's rt_sigframe at sp (a siginfo,
// then the ucontext whose uc_mcontext, 176 bytes in, is a struct
// sigcontext: fault_address, regs[31], sp, pc). On each core, a frame as
// the kernel would build it is laid below a parked thread's stack, holding
// that thread's registers, and the unwind starts at the trampoline of the
// core's own vDSO: it is recognized by its code (its CFI, which gives only
// the frame record, would lose the interrupted pc), and the rest is the
// thread's own chain, its first frame exact.
func TestAArch64CoreSignalFrame(t *testing.T) {
	const frameSize = 128 + 176 + 8 + 34*8 + 4096 // siginfo, ucontext up to sigcontext's regs, regs..pstate, and the rest
	for _, pages := range arm64Cores {
		t.Run(pages, func(t *testing.T) {
			c := openARM64Core(t, "arenas-"+pages)
			tramp, err := c.mods.DynamicSymbol(module.VDSO, "__kernel_rt_sigreturn")
			if err != nil {
				t.Fatal(err)
			}
			u := unwind.New(c.mods)
			for _, th := range c.tg.Threads() {
				start, stack := c.start(t, th)
				want := u.Unwind(start, stack)
				base := (th.SP() - frameSize) &^ 15
				data := make([]byte, th.SP()-base, th.SP()-base+uint64(len(stack.Data)))
				regs := arch.ARM64.FromPrstatus(th.Regs[:arch.ARM64.NumWords])
				for n := 0; n <= arch.ARM64PC; n++ {
					v, _ := regs.Get(n)
					binary.LittleEndian.PutUint64(data[128+176+8+8*n:], v)
				}
				data = append(data, stack.Data...)
				var at debuggee.Regs
				at.SetPCOf(arch.ARM64, tramp)
				at.SetSPOf(arch.ARM64, base)
				tr := u.Unwind(unwind.Start{Regs: at, HaveCalleeSaved: true}, unwind.Stack{Addr: base, Data: data, End: stack.End})
				got := c.names(tr)
				// (The symbolizer names no vDSO symbol that is not a
				// function: the trampoline is found by its address.)
				if len(tr.Frames) != len(want.Frames)+1 || tr.Frames[0].PC != tramp || tr.Frames[0].Method != unwind.MethodSignal || !slices.Equal(got[1:], c.names(want)) {
					t.Fatalf("thread %d: %v (first %#x by %s), want the trampoline %#x by signal, then %v", th.Tid, got, tr.Frames[0].PC, tr.Frames[0].Method, tramp, c.names(want))
				}
				for i, f := range tr.Frames[1:] {
					if f.PC != want.Frames[i].PC || f.SP != want.Frames[i].SP || f.Exact != want.Frames[i].Exact {
						t.Errorf("thread %d frame %d: pc %#x sp %#x exact %v, want %#x %#x %v", th.Tid, i+1, f.PC, f.SP, f.Exact, want.Frames[i].PC, want.Frames[i].SP, want.Frames[i].Exact)
					}
				}
			}
		})
	}
}
