package core

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"github.com/arenactl/arenactl/internal/arch"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
)

// fakeMem is a synthetic address space: every readable mapping holds a
// pattern that is never zero, except the pages listed as zero; the pages
// listed as bad cannot be read.
type fakeMem struct {
	ms        []maps.Mapping
	zero, bad map[uint64]bool
}

func pattern(a uint64) byte { return byte(a>>3) ^ byte(a>>12) | 1 }

func (f *fakeMem) ReadAt(p []byte, addr uint64) (int, error) {
	for i := range p {
		a := addr + uint64(i)
		m, ok := maps.Find(f.ms, a)
		pg := a &^ (PageSize - 1)
		if !ok || !m.Readable() || f.bad[pg] {
			return i, fmt.Errorf("fault at %#x", a)
		}
		p[i] = pattern(a)
		if f.zero[pg] {
			p[i] = 0
		}
	}
	return len(p), nil
}

var testMaps = []maps.Mapping{
	{Start: 0x400000, End: 0x402000, Perms: "r--p", Dev: "08:01", Inode: 12, Path: "/usr/bin/prog"},
	{Start: 0x402000, End: 0x403000, Perms: "r-xp", Offset: 0x2000, Dev: "08:01", Inode: 12, Path: "/usr/bin/prog"},
	{Start: 0x403000, End: 0x404000, Perms: "rw-p", Offset: 0x3000, Dev: "08:01", Inode: 12, Path: "/usr/bin/prog"},
	{Start: 0x1000000, End: 0x1010000, Perms: "rw-p", Dev: "00:00", Path: "[heap]", Rss: 0x8000, PrivateDirty: 0x8000, Anonymous: 0x8000},
	{Start: 0x7f0000000000, End: 0x7f0000004000, Perms: "rw-p", Dev: "00:00", Path: "[anon: glibc: malloc arena]", Rss: 0x2000},
	{Start: 0x7f0000004000, End: 0x7f0004000000, Perms: "---p", Dev: "00:00"},
	{Start: 0x7f1000000000, End: 0x7f1000001000, Perms: "r--p", Dev: "08:01", Inode: 99, Path: "/opt/my lib.so (deleted)", Deleted: true},
	{Start: 0x7ffc00000000, End: 0x7ffc00021000, Perms: "rw-p", Dev: "00:00", Path: "[stack]", Swap: 0x1000},
}

func testSnapshot() *Snapshot {
	s := &Snapshot{Pid: 100, PPid: 1, Pgrp: 100, Sid: 100, Uid: 1000, Gid: 1000, State: 'S',
		Command: "prog", Args: "/usr/bin/prog --flag", Mappings: testMaps}
	for i, tid := range []int{100, 101} {
		th := debuggee.Thread{Tid: tid}
		for r := range th.Regs[:arch.AMD64.NumWords] { // an x86_64 snapshot's
			th.Regs[r] = uint64(1000*(i+1) + r)
		}
		if i == 0 {
			th.XState = make([]byte, 832)
			th.XState[0] = 0x7f
		}
		s.Threads = append(s.Threads, th)
	}
	for _, kv := range [][2]uint64{{atPhdr, 0x400040}, {atEntry, 0x402000}, {0, 0}} {
		s.Auxv = endian.AppendUint64(endian.AppendUint64(s.Auxv, kv[0]), kv[1])
	}
	return s
}

// A snapshot written in two rounds reads back whole: identity, threads,
// auxv, NT_FILE, the exact mapping list, dumped memory, zero pages, and
// ErrNotInCore for what was left out.
func TestWriteReadBack(t *testing.T) {
	mem := &fakeMem{ms: testMaps, zero: map[uint64]bool{0x1002000: true}, bad: map[uint64]bool{0x1003000: true}}
	for pg := uint64(0x1008000); pg < 0x1010000; pg += PageSize {
		mem.zero[pg] = true // untouched: the caller lists these as zeros
	}
	path := filepath.Join(t.TempDir(), "core")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, testSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	w.Zeros([]maps.Range{{Start: 0x1008000, End: 0x1010000}})
	ctx := context.Background()
	if err := w.Dump(ctx, mem, []maps.Range{{Start: 0x403000, End: 0x404000}, {Start: 0x1000000, End: 0x1008000}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Dump(ctx, mem, []maps.Range{{Start: 0x400000, End: 0x401000}, {Start: 0x7f0000000000, End: 0x7f0000002000}}); err != nil {
		t.Fatal(err)
	}
	w.AddNote(NoteAllocator, []byte(`{"note_version":1}`))
	w.AddNote(99, []byte("odd"))
	st, err := w.Close()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.Dumped != 0x1000+6*0x1000+0x1000+0x2000 || st.Zeros != 0x1000+0x8000 || st.Unreadable != 0x1000 {
		t.Errorf("stats %+v", st)
	}
	if fi, _ := os.Stat(path); fi.Size() != st.Size {
		t.Errorf("file of %d bytes, stats say %d", fi.Size(), st.Size)
	}

	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Pid != 100 || c.Command != "prog" || c.Signal != nil || c.Exe() != "/usr/bin/prog" {
		t.Errorf("pid %d, command %q, signal %v, exe %q", c.Pid, c.Command, c.Signal, c.Exe())
	}
	s := testSnapshot()
	if len(c.Threads) != 2 || c.Threads[0].Tid != 100 || c.Threads[0].Regs != s.Threads[0].Regs || c.Threads[1].Regs != s.Threads[1].Regs {
		t.Errorf("threads %+v", c.Threads)
	}
	if c.Auxv[atEntry] != 0x402000 {
		t.Errorf("auxv %v", c.Auxv)
	}
	if len(c.Files) != 4 || c.Files[2].Offset != 0x3000 || c.Files[3].Path != "/opt/my lib.so (deleted)" {
		t.Errorf("NT_FILE %+v", c.Files)
	}
	if !reflect.DeepEqual(c.Mappings, testMaps) {
		t.Errorf("mappings\n%+v\nwant\n%+v", c.Mappings, testMaps)
	}
	if string(c.Note(NoteAllocator)) != `{"note_version":1}` || string(c.Note(99)) != "odd" || c.Note(ntMaps) != nil || c.Note(5) != nil {
		t.Errorf("notes added: %q, %q; not added: %q, %q", c.Note(NoteAllocator), c.Note(99), c.Note(ntMaps), c.Note(5))
	}

	want := func(addr uint64, n int) []byte {
		b := make([]byte, n)
		mem.ReadAt(b, addr)
		return b
	}
	for _, r := range []struct {
		addr uint64
		n    int
	}{
		{0x400000, 0x1000}, {0x403ff8, 8}, {0x1000000, 0x2000}, {0x1001800, 0x1000}, // into the zero page
		{0x1002000, 0x1000}, {0x1007ff0, 0x20}, {0x100f000, 0x1000}, {0x7f0000001ff8, 8},
	} {
		got := make([]byte, r.n)
		if n, err := c.ReadAt(got, r.addr); err != nil || n != r.n || string(got) != string(want(r.addr, r.n)) {
			t.Errorf("%#x+%d: %d bytes, %v, or different contents", r.addr, r.n, n, err)
		}
	}
	for _, addr := range []uint64{0x401000, 0x402000, 0x1003000, 0x7f0000002000, 0x7f0000004000, 0x7ffc00000000} {
		var b [8]byte
		if _, err := c.ReadAt(b[:], addr); !errors.Is(err, ErrNotInCore) {
			t.Errorf("%#x: %v, want ErrNotInCore", addr, err)
		}
	}

	// The PT_LOADs tile every mapping, in address order, with the
	// permissions of the mapping.
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	var next uint64
	mi := 0
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		if mi < len(testMaps) && p.Vaddr == testMaps[mi].Start {
			next = p.Vaddr
		}
		m := testMaps[mi]
		if p.Vaddr != next || p.Vaddr+p.Memsz > m.End || perms(p.Flags)[:3] != m.Perms[:3] || p.Off == 0 {
			t.Errorf("segment %#x+%#x (%v, offset %#x) in mapping %#x-%#x %s", p.Vaddr, p.Memsz, p.Flags, p.Off, m.Start, m.End, m.Perms)
		}
		next = p.Vaddr + p.Memsz
		if next == m.End {
			mi++
		}
	}
	if mi != len(testMaps) {
		t.Errorf("segments cover %d of %d mappings", mi, len(testMaps))
	}
}

func TestWriteRefuses(t *testing.T) {
	ctx := context.Background()
	mem := &fakeMem{ms: testMaps}
	dir := t.TempDir()
	try := func(name string, dumps ...[]maps.Range) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w, err := NewWriter(f, testSnapshot())
		if err != nil {
			return err
		}
		for _, d := range dumps {
			if err := w.Dump(ctx, mem, d); err != nil {
				return err
			}
		}
		_, err = w.Close()
		return err
	}
	for name, dumps := range map[string][][]maps.Range{
		"unaligned":    {{{Start: 0x400000, End: 0x400800}}},
		"out of order": {{{Start: 0x401000, End: 0x402000}, {Start: 0x400000, End: 0x401000}}},
		"overlap":      {{{Start: 0x400000, End: 0x402000}}, {{Start: 0x401000, End: 0x402000}}},
	} {
		if err := try(name, dumps...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	f, _ := os.Create(filepath.Join(dir, "nothreads"))
	defer f.Close()
	if _, err := NewWriter(f, &Snapshot{Mappings: testMaps}); err == nil {
		t.Error("a core without threads was started")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	w, _ := NewWriter(f, testSnapshot())
	if err := w.Dump(cancelled, mem, []maps.Range{{Start: 0x400000, End: 0x401000}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled dump: %v", err)
	}
}

// The mapping list survives the trip through smaps text, odd paths included.
func TestFormatSmaps(t *testing.T) {
	got, err := maps.ParseSmaps(strings.NewReader(string(FormatSmaps(testMaps))))
	if err != nil || !reflect.DeepEqual(got, testMaps) {
		t.Fatalf("%v\n%+v", err, got)
	}
}
