package unwind_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/testutil"
	"github.com/arenactl/arenactl/internal/unwind"
)

// pacTarget is what testdata/unwind_pac/pac.c wrote of itself: its
// mappings, and one thread of which only the stack copy is memory.
type pacTarget struct {
	ms     []maps.Mapping
	thread debuggee.Thread
	sp     uint64
	stack  []byte
}

func (p *pacTarget) ReadAt(b []byte, addr uint64) (int, error) {
	if addr < p.sp || addr-p.sp >= uint64(len(p.stack)) {
		return 0, errors.New("not in the copy")
	}
	return copy(b, p.stack[addr-p.sp:]), nil
}
func (p *pacTarget) Process() debuggee.Process                 { return debuggee.Process{Pid: 1, Exe: "pac"} }
func (p *pacTarget) Mappings() []maps.Mapping                  { return p.ms }
func (p *pacTarget) Threads() []debuggee.Thread                { return []debuggee.Thread{p.thread} }
func (p *pacTarget) Arch() *arch.Arch                          { return arch.ARM64 }
func (p *pacTarget) OpenFile(m maps.Mapping) (*os.File, error) { return os.Open(m.Path) }
func (p *pacTarget) Close() error                              { return nil }

// TestAArch64SignedFrames unwinds real pointer-authenticated frames: pac.c
// built with -mbranch-protection=standard (every function signs x30 with
// paciasp before saving it, and its CFI carries
// DW_CFA_AARCH64_negate_ra_state), run under qemu-user with -cpu max, so
// the saved return addresses and x30 hold a code above their 48 address
// bits. Every frame is found by its CFI (an interpreter that stops at the
// opcode falls back to the frame pointer) with the code stripped: leaf3,
// mid2, top1, main, then glibc's __libc_start_call_main,
// __libc_start_main and _start (the first two of Debian's cross glibc,
// built without pac-ret). It needs the aarch64 cross compiler, its
// glibc (/usr/aarch64-linux-gnu) and qemu-aarch64.
func TestAArch64SignedFrames(t *testing.T) {
	gcc, err := exec.LookPath("aarch64-linux-gnu-gcc")
	if err != nil {
		t.Skip("no aarch64-linux-gnu-gcc")
	}
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		if qemu, err = exec.LookPath("qemu-aarch64"); err != nil {
			t.Skip("no qemu-aarch64")
		}
	}
	const sysroot = "/usr/aarch64-linux-gnu"
	if _, err := os.Stat(filepath.Join(sysroot, "lib", "ld-linux-aarch64.so.1")); err != nil {
		t.Skip("no aarch64 glibc under", sysroot)
	}
	dir := t.TempDir()
	exe, out := filepath.Join(dir, "pac"), filepath.Join(dir, "out")
	src := filepath.Join(testutil.RepoRoot(t), "testdata", "unwind_pac", "pac.c")
	if b, err := exec.Command(gcc, "-O2", "-g", "-mbranch-protection=standard", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if b, err := exec.Command(qemu, "-cpu", "max", "-L", sysroot, exe, out).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	raw, err := os.ReadFile(out)
	if err != nil || len(raw) < 40 {
		t.Fatalf("%d bytes: %v", len(raw), err)
	}
	w := func(i int) uint64 { return binary.LittleEndian.Uint64(raw[8*i:]) }
	pc, sp, fp, lr, n := w(0), w(1), w(2), w(3), w(4)
	if uint64(len(raw)) < 40+n {
		t.Fatalf("a stack of %d bytes in %d", n, len(raw))
	}
	ms, err := maps.ParseMaps(bytes.NewReader(raw[40+n:]))
	if err != nil {
		t.Fatal(err)
	}
	tg := &pacTarget{ms: ms, sp: sp, stack: raw[40 : 40+n]}
	tg.thread = debuggee.Thread{Tid: 1, Arch: arch.ARM64}
	for i, d := range arch.ARM64.Prstatus.Words {
		switch d {
		case arch.ARM64PC:
			tg.thread.Regs[i] = pc
		case arch.ARM64SP:
			tg.thread.Regs[i] = sp
		case arch.ARM64FP:
			tg.thread.Regs[i] = fp
		case arch.ARM64LR:
			tg.thread.Regs[i] = lr
		}
	}
	mods := module.NewTable(tg)
	defer mods.Close()
	tr := unwind.New(mods).Unwind(unwind.Start{Regs: tg.thread.Regs, HaveCalleeSaved: true}, unwind.Stack{Addr: sp, Data: tg.stack})
	sym := symbolize.New(mods)
	var got []string
	for _, f := range tr.Frames {
		got = append(got, sym.Symbolize(f.LookupPC()).Function)
	}
	// __libc_start_call_main is a static function: without libc's debug
	// file (not installed with the cross glibc) it has no name, only its
	// module.
	want := []string{"leaf3", "mid2", "top1", "main", "", "__libc_start_main", "_start"}
	if !slices.Equal(got, want) || tr.Stop != unwind.StopEnd || tr.Frames[4].Module == nil || filepath.Base(tr.Frames[4].Module.Path) != "libc.so.6" {
		t.Fatalf("chain %v (%s), want %v, the unnamed one in libc", got, tr.Stop, want)
	}
	// The program's return addresses were signed where they were saved.
	signed := 0
	for i := 0; i+8 <= len(tg.stack); i += 8 {
		v := binary.LittleEndian.Uint64(tg.stack[i:])
		if s := arch.ARM64.StripCode(v); s != v && slices.ContainsFunc(tr.Frames, func(f unwind.Frame) bool { return f.PC == s }) {
			signed++
		}
	}
	// A code is 7 bits here (bits 54:48, qemu's 48-bit addresses with the
	// top byte ignored), so one signed address in 128 reads as unsigned:
	// the CI saw that once. Four are signed (x30 and three saved on the
	// stack); any two of them show pointer authentication was on (odds of
	// failing that with it on, about 2 in a million).
	if arch.ARM64.StripCode(lr) != lr {
		signed++
	}
	if signed < 2 {
		t.Fatalf("%d signed return addresses in x30 (%#x) and on the stack: pointer authentication was not on", signed, lr)
	}
	for i, f := range tr.Frames[:4] {
		if f.Method != unwind.MethodCFI || f.PC>>48 != 0 {
			t.Errorf("frame %d (%s): pc %#x by %s, want the address by cfi", i, got[i], f.PC, f.Method)
		}
	}
}
