package maps

import (
	"strings"
	"testing"
)

// A made-up but kernel-shaped layout; the comment after each line is the
// class Classify must give it.
const classifyMaps = `
55d0c8a00000-55d0c8a02000 r--p 00000000 fe:00 1 /usr/bin/my prog (deleted)      | executable
55d0c8a02000-55d0c8a08000 r-xp 00002000 fe:00 1 /usr/bin/my prog (deleted)      | executable
55d0c9c1e000-55d0c9c3f000 rw-p 00000000 00:00 0 [heap]                           | main-heap
7f0000000000-7f0000021000 rw-p 00000000 00:00 0                                  | arena-heap
7f0000021000-7f0004000000 ---p 00000000 00:00 0                                  | arena-heap
7f0004000000-7f0008100000 rw-p 00000000 00:00 0                                  | arena-heap
7f0008100000-7f000c000000 ---p 00000000 00:00 0                                  | arena-heap
7f000c000000-7f0010000000 rw-p 00000000 00:00 0                                  | arena-heap
7f0010000000-7f0014000000 ---p 00000000 00:00 0                                  | arena-heap
7f0014000000-7f0014100000 rw-p 00000000 00:00 0 [anon: glibc: malloc arena]      | arena-heap
7f0014100000-7f0018000000 ---p 00000000 00:00 0 [anon: glibc: malloc arena]      | arena-heap
7f0018000000-7f0018001000 ---p 00000000 00:00 0                                  | anon
7f0020000000-7f0020001000 ---p 00000000 00:00 0                                  | thread-stack
7f0020001000-7f0020801000 rw-p 00000000 00:00 0                                  | thread-stack
7f0020801000-7f0020802000 ---p 00000000 00:00 0                                  | thread-stack
7f0020802000-7f0021002000 rw-p 00000000 00:00 0                                  | thread-stack
7f0021002000-7f0021003000 ---p 00000000 00:00 0                                  | thread-stack
7f0021003000-7f002100b000 rw-p 00000000 00:00 0                                  | thread-stack
7f0021100000-7f0021101000 ---p 00000000 00:00 0                                  | anon
7f0021101000-7f0021102000 rw-p 00000000 00:00 0                                  | anon
7f0021200000-7f0021400000 ---p 00000000 00:00 0                                  | anon
7f0021400000-7f0021500000 rw-p 00000000 00:00 0                                  | anon
7f0021500000-7f0021501000 ---p 00000000 00:00 0                                  | thread-stack
7f0021501000-7f0021600000 rw-p 00000000 00:00 0 [anon: glibc: pthread stack: 42] | thread-stack
7f0021600000-7f0021700000 rw-p 00000000 00:00 0 [anon: glibc: malloc]            | anon
7f0021700000-7f0021800000 rw-s 00000000 00:01 7 /memfd:buf (deleted)             | file
7f0021800000-7f0021900000 rw-s 00000000 00:01 8 /dev/zero (deleted)              | file
7f0021900000-7f0021a00000 r--p 00000000 fe:00 9 /usr/lib/locale/C.utf8/LC_CTYPE  | file
7f0037b00000-7f0037b26000 r--p 00000000 fe:00 2 /usr/lib/x86_64-linux-gnu/libc.so.6       | shared-lib
7f0037c00000-7f0037c26000 r--p 00000000 fe:00 3 /lib/libc-2.31.so                         | shared-lib
7f0037d00000-7f0037d26000 r--p 00000000 fe:00 4 /lib64/ld-linux-x86-64.so.2               | shared-lib
7f0037e00000-7f0037e01000 r--p 00000000 00:00 0 [vvar]                           | special
7f0037e01000-7f0037e02000 r--p 00000000 00:00 0 [vvar_vclock]                    | special
7f0037e02000-7f0037e04000 r-xp 00000000 00:00 0 [vdso]                           | special
7ffd1a2b3000-7ffd1a2d4000 rw-p 00000000 00:00 0 [stack]                          | main-stack
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]               | special
`

// classifyCase splits classifyMaps into maps text and wanted classes.
func classifyCase(t *testing.T) ([]Mapping, []string) {
	t.Helper()
	var text strings.Builder
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(classifyMaps), "\n") {
		mapLine, class, _ := strings.Cut(line, "|")
		text.WriteString(strings.TrimRight(mapLine, " ") + "\n")
		want = append(want, strings.TrimSpace(class))
	}
	ms, err := ParseMaps(strings.NewReader(text.String()))
	if err != nil {
		t.Fatal(err)
	}
	return ms, want
}

func TestClassify(t *testing.T) {
	ms, want := classifyCase(t)
	Classify(ms, Hints{
		ExePath: "/usr/bin/my prog (deleted)",
		StackPointers: map[int]uint64{
			1:  0x7ffd1a2d3f00, // main thread, in [stack]
			10: 0x7f0020800f00, // in the first pthread stack
			11: 0x7f002100a000, // a small stack whose guard the heuristic misses
			12: 0x7f0000010000, // a coroutine stack inside an arena heap
			13: 0x1000,         // nowhere
		},
	})
	for i, m := range ms {
		if got := m.Class.String(); got != want[i] {
			t.Errorf("%x-%x %s %q: class %s, want %s", m.Start, m.End, m.Perms, m.Path, got, want[i])
		}
	}
}

func TestClassifyNoHints(t *testing.T) {
	ms, want := classifyCase(t)
	Classify(ms, Hints{})
	for i, m := range ms {
		w := want[i]
		switch {
		case w == "executable":
			w = "file" // no ExePath, and "prog" is no .so
		case m.Start == 0x7f0021002000 || m.Start == 0x7f0021003000:
			w = "anon" // too small for a stack without its stack pointer
		}
		if got := m.Class.String(); got != w {
			t.Errorf("%x-%x %s %q: class %s, want %s", m.Start, m.End, m.Perms, m.Path, got, w)
		}
	}
}

func TestSummarize(t *testing.T) {
	ms, _ := classifyCase(t)
	for i := range ms {
		ms[i].Rss = uint64(i) << 12
	}
	Classify(ms, Hints{})
	rows := Summarize(ms)
	var count int
	var size, rss uint64
	for i, r := range rows {
		if i > 0 && rows[i-1].Class >= r.Class {
			t.Errorf("rows out of Class order: %v before %v", rows[i-1].Class, r.Class)
		}
		if r.Count == 0 {
			t.Errorf("empty row for %v", r.Class)
		}
		count += r.Count
		size += r.Size
		rss += r.Rss
	}
	var wantSize, wantRss uint64
	for _, m := range ms {
		wantSize += m.Size()
		wantRss += m.Rss
	}
	if count != len(ms) || size != wantSize || rss != wantRss {
		t.Errorf("rows total %d mappings, %d bytes, %d rss; want %d, %d, %d", count, size, rss, len(ms), wantSize, wantRss)
	}
	if Summarize(nil) != nil {
		t.Errorf("Summarize(nil) has rows")
	}
}

func TestFind(t *testing.T) {
	ms, _ := classifyCase(t)
	for _, m := range ms {
		for _, addr := range []uint64{m.Start, m.End - 1, m.Start + m.Size()/2} {
			got, ok := Find(ms, addr)
			if !ok || got.Start != m.Start {
				t.Errorf("Find(%#x) = %x-%x, %v; want %x-%x", addr, got.Start, got.End, ok, m.Start, m.End)
			}
		}
	}
	for _, addr := range []uint64{0, 0x55d0c8a08000, 0x7f0018001000, 0xffffffffffffffff} {
		if got, ok := Find(ms, addr); ok {
			t.Errorf("Find(%#x) = %x-%x, want none", addr, got.Start, got.End)
		}
	}
	if _, ok := Find(nil, 0); ok {
		t.Errorf("Find in no mappings found one")
	}
}
