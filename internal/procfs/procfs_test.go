package procfs

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	st, err := parseStat(7, "7 (a (b) c) S 1 7 7 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 123456 0 0")
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "a (b) c" || st.State != 'S' || st.PPid != 1 || st.Pgrp != 7 || st.Session != 7 || st.StartTime != 123456 {
		t.Errorf("%+v", st)
	}
	for _, bad := range []string{"", "7 no parens", "7 (x)", "7 (x) "} {
		if _, err := parseStat(7, bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil || st.State != 'R' || st.StartTime == 0 || st.PPid != os.Getppid() {
		t.Fatalf("%+v, %v", st, err)
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("a pid that cannot exist: %v", err)
	}
}

// Runs tells pages that hold data from pages never touched or given back.
func TestPagemapRuns(t *testing.T) {
	page := os.Getpagesize()
	b, err := unix.Mmap(-1, 0, 8*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	for _, pg := range []int{0, 1, 4} {
		b[pg*page] = 1
	}
	pm, err := OpenPagemap(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer pm.Close()
	start := uint64(uintptr(unsafe.Pointer(&b[0])))
	type run struct {
		from, to int
		data     bool
	}
	var got []run
	if err := pm.Runs(start, start+uint64(8*page), func(s, e uint64, data bool) {
		got = append(got, run{int(s-start) / page, int(e-start) / page, data})
	}); err != nil {
		t.Fatal(err)
	}
	want := []run{{0, 2, true}, {2, 4, false}, {4, 5, true}, {5, 8, false}}
	if len(got) != len(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("runs %v, want %v", got, want)
		}
	}
}

// The stack pointer is the next-to-last field, blocked in a syscall or not.
func TestParseSyscall(t *testing.T) {
	for _, tc := range []struct {
		text   string
		sp     uint64
		ok     bool
		hasErr bool
	}{
		{"running\n", 0, false, false},
		{"34 0x0 0x0 0x2 0x0 0x562fd930b080 0x1 0x7fefe0037eb0 0x7fefe010fdf2\n", 0x7fefe0037eb0, true, false},
		{"-1 0x7ffc12345678 0x401000\n", 0x7ffc12345678, true, false},
		{"34 0x0 0x0\n", 0, false, true},
		{"-1 12345678 0x401000\n", 0, false, true},
		{"-1 0xzz 0x401000\n", 0, false, true},
		{"", 0, false, true},
	} {
		sc, err := ParseSyscall(tc.text)
		sp, ok := sc.SP, !sc.Running && err == nil
		if sp != tc.sp || ok != tc.ok || (err != nil) != tc.hasErr {
			t.Errorf("ParseSyscall(%q) = %+v, %v; want sp %#x, blocked %v, error %v", tc.text, sc, err, tc.sp, tc.ok, tc.hasErr)
		}
	}
}

// Short ranges are answered from a kept block of entries: asked page by
// page, in and out of order and across block edges, Resident says what
// one read of the whole stretch says.
func TestPagemapResidentShortRanges(t *testing.T) {
	page := os.Getpagesize()
	const pages = 3 * pmBlock
	b, err := unix.Mmap(-1, 0, pages*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	touched := 0
	for pg := 0; pg < pages; pg += 3 {
		b[pg*page] = 1
		touched++
	}
	pm, err := OpenPagemap(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer pm.Close()
	start := uint64(uintptr(unsafe.Pointer(&b[0])))
	whole, err := pm.Resident(start, start+uint64(pages*page))
	if err != nil {
		t.Fatal(err)
	}
	if whole != uint64(touched*page) {
		t.Fatalf("whole: %d resident, %d touched", whole/uint64(page), touched)
	}
	// Page by page, then in ranges of 5 pages from an odd start, which
	// cross the blocks' edges.
	for _, c := range []struct{ from, step int }{{0, 1}, {1, 5}} {
		sum, _ := pm.Resident(start, start+uint64(c.from*page))
		for pg := c.from; pg < pages; pg += c.step {
			r, err := pm.Resident(start+uint64(pg*page), start+uint64(min(pg+c.step, pages)*page))
			if err != nil {
				t.Fatal(err)
			}
			sum += r
		}
		if sum != whole {
			t.Errorf("in ranges of %d pages: %d resident, whole %d", c.step, sum/uint64(page), whole/uint64(page))
		}
	}
}
