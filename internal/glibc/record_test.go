package glibc

import (
	"debug/elf"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/module"
)

// sliceMem is memory holding b at base and nothing else.
type sliceMem struct {
	base uint64
	b    []byte
}

func (s sliceMem) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < s.base || addr+uint64(len(p)) > s.base+uint64(len(s.b)) {
		return 0, fmt.Errorf("%#x: not mapped", addr)
	}
	return copy(p, s.b[addr-s.base:]), nil
}

// The build-id a core holds in libc's first page is the file's; memory that
// lacks the page, or holds something else, gives an error, never a panic.
func TestCoreBuildIDInMemory(t *testing.T) {
	const path = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	ef, err := elf.Open(path)
	if err != nil {
		t.Skip(err)
	}
	want := module.BuildIDOf(ef)
	ef.Close()
	file, err := os.ReadFile(path)
	if err != nil || want == "" {
		t.Skipf("%s: %v, build-id %q", path, err, want)
	}
	const base = 0x7f0000000000
	if got, err := BuildIDInMemory(sliceMem{base, file[:pageSz]}, base); err != nil || got != want {
		t.Errorf("first page: %q, %v; want %q", got, err, want)
	}
	for name, b := range map[string][]byte{
		"header only":  file[:64],
		"no headers":   file[:40],
		"not ELF":      make([]byte, pageSz),
		"cut notes":    file[:0x300],
		"phnum of 300": append(append(append([]byte(nil), file[:56]...), 44, 1), file[58:pageSz]...),
	} {
		if got, err := BuildIDInMemory(sliceMem{base, b}, base); err == nil {
			t.Errorf("%s: build-id %q, no error", name, got)
		}
	}
}

// A record reads back, from any note version on (fields it does not know
// are ignored), and a record that does not fit is refused with a reason.
func TestSnapshotRecordFormat(t *testing.T) {
	tc, ta := uint64(0xffffffffffffff40), uint64(0xffffffffffffff38)
	r := &Record{NoteVersion: RecordVersion, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6", Glibc: "2.36", BuildID: "abcd",
		Layout: "K", Base: 0x7f0000000000, MainArena: 0x7f00001d2c60, Mp: 0x7f00001d2340, Method: "debug symbols",
		TLSTcache: &tc, TLSThreadArena: &ta}
	got, err := ParseRecord(r.Marshal())
	if err != nil || got.Glibc != "2.36" || got.MainArena != r.MainArena || *got.TLSTcache != tc || *got.TLSThreadArena != ta {
		t.Fatalf("%+v, %v", got, err)
	}
	future := `{"note_version": 7, "glibc": "2.41", "layout": "K", "main_arena": 16, "mp": 32, "tls_tcache": 18446744073709551424, "something_new": [1, 2]}`
	if got, err := ParseRecord([]byte(future)); err != nil || got.Glibc != "2.41" || got.TLSThreadArena != nil || *got.TLSTcache != 0xffffffffffffff40 {
		t.Errorf("a later note version: %+v, %v", got, err)
	}
	for _, bad := range []string{``, `{}`, `{"note_version": 0}`, `[1]`, `{"note_version": "1"}`} {
		if _, err := ParseRecord([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	mem := sliceMem{0x1000, make([]byte, 0x100)}
	for _, c := range []struct {
		glibc, layout, want string
	}{
		{"2.99", "K", "does not know"},
		{"2.36", "M", "layout M"},
		{"2.36", "K", "main_arena"}, // memory does not hold it
	} {
		r := &Record{NoteVersion: 1, Glibc: c.glibc, Layout: c.layout, MainArena: 0x10000}
		if _, _, _, err := r.Libc(nil, mem); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("glibc %s layout %s: %v, want %q", c.glibc, c.layout, err, c.want)
		}
	}
}
