package libc

import (
	"debug/elf"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
)

// libc_malloc_debug.so's copy of malloc is compiled without tcache: its
// mp_ initialiser is found only with the tcache fields left out, and its
// main_arena like libc's.
func TestMallocDebugLayout(t *testing.T) {
	const path = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
	ef, err := elf.Open(path)
	if err != nil {
		t.Skipf("no %s: %v", path, err)
	}
	defer ef.Close()
	img, err := readImage(ef)
	if err != nil {
		t.Fatal(err)
	}
	// Its version is that of the libc beside it.
	lf, err := elf.Open("/usr/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip(err)
	}
	defer lf.Close()
	_, v, err := Banner(lf)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := layouts.LayoutFor(v)
	lay, err := LayoutOf(&Libc{Version: v, MallocDebug: true})
	if err != nil {
		t.Fatal(err)
	}
	if lay.TcacheBins != 0 || lay.MpTcacheCount != -1 || lay.MpSize != full.MpTcacheBins {
		t.Fatalf("layout without tcache: %+v", lay)
	}
	if _, err := img.findMp(full); err == nil {
		t.Error("mp_ found with the tcache fields of libc's layout")
	}
	if _, err := img.findMp(lay); err != nil {
		t.Errorf("mp_: %v", err)
	}
	if _, err := img.findMainArena(lay); err != nil {
		t.Errorf("main_arena: %v", err)
	}
}
