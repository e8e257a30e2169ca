package core_test

import (
	"errors"
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/maps"
)

// testdata/aarch64-static-qemu.core.zst is the core qemu-user (Debian 12's
// qemu-aarch64-static) wrote of testdata/aarch64-static-qemu.c, built with
// Debian 12's aarch64-linux-gnu-gcc -static -O0 (glibc 2.36), when it
// stopped on the brk in main at 0x400704 (main is 0x4006d4..; the
// executable's text at 0x400000). qemu writes NT_PRSTATUS, NT_PRPSINFO and
// NT_AUXV, no NT_FILE nor NT_ARM_TLS.
//
// Its thread's registers are aarch64's pr_reg words: the pc is the brk,
// the stack pointer in the stack; the machine comes from e_machine. Its
// heap is no longer refused for the machine (errkind.ErrArch): the
// committed kernel cores of testdata/cores/arm64 are walked
// (internal/heap's TestAArch64CoreFixtures); this one names no files, so
// its allocator is not found, and says so.
func TestAArch64Core(t *testing.T) {
	tg, err := core.OpenTarget("testdata/aarch64-static-qemu.core.zst", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	a := tg.Arch()
	if a != arch.ARM64 {
		t.Fatalf("machine %v, want aarch64", a)
	}
	ths := tg.Threads()
	if len(ths) != 1 {
		t.Fatalf("%d threads, want 1", len(ths))
	}
	if pc := ths[0].PCOf(a); pc != 0x400704 {
		t.Errorf("pc %#x, want the brk at 0x400704", pc)
	}
	sp := ths[0].SPOf(a)
	m, ok := maps.Find(tg.Mappings(), sp)
	if !ok || sp%16 != 0 || m.Class != maps.ClassMainStack && m.Class != maps.ClassThreadStack {
		t.Errorf("sp %#x: in %+v (found %v), want 16-aligned in the stack", sp, m, ok)
	}
	if ps := tg.PageSize(); ps != 4096 {
		t.Errorf("page size %d, want AT_PAGESZ's 4096", ps)
	}
	if _, err := heap.OpenCore(tg, heap.Options{NoLibcFile: true}); err == nil || errors.Is(err, errkind.ErrArch) {
		t.Errorf("heap.OpenCore: %v, want an error that is not the machine's (errkind.ErrArch)", err)
	}
}
