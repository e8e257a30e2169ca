package maps

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// parkedStackPointers polls StackPointers until all n threads are blocked:
// "ready" is written before the threads have all reached pause().
func parkedStackPointers(t *testing.T, pid, n int) map[int]uint64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sps, err := StackPointers(pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(sps) == n {
			return sps
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d threads blocked after 5s: %v", len(sps), n, sps)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLiveProcess(t *testing.T) {
	// testdata/maps_threads.c: a main thread and 3 pthreads, each with
	// malloced chunks, all parked in pause(). It runs from a private copy
	// because unlinking the running executable checks the " (deleted)"
	// handling on a real /proc too.
	bin := testutil.PrivateCopy(t, testutil.BuildC(t, "maps_threads.c"))
	tg := testutil.Start(t, bin)
	if tg.Ready() != "ready" {
		t.Fatalf("target said %q", tg.Ready())
	}
	pid := tg.Pid
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	exePath := bin + deletedSuffix

	sps := parkedStackPointers(t, pid, 4)
	ms, err := Read(pid, true)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ReadHints(pid)
	if err != nil {
		t.Fatal(err)
	}
	if h.ExePath != exePath {
		t.Errorf("ExePath = %q, want %q", h.ExePath, exePath)
	}
	h.StackPointers = sps
	Classify(ms, h)
	if testing.Verbose() {
		for _, m := range ms {
			t.Logf("%x-%x %s %10d %-12v %s", m.Start, m.End, m.Perms, m.Rss, m.Class, m.Path)
		}
	}

	var mainHeaps, arenaHeaps int
	var exe, libc, vdso bool
	for _, m := range ms {
		switch {
		case m.Class == ClassMainHeap:
			mainHeaps++
		case m.Class == ClassArenaHeap && m.Perms == "rw-p" && m.Start%HeapMaxSize == 0:
			arenaHeaps++
		}
		switch {
		case m.Path == exePath:
			exe = true
			if m.Class != ClassExecutable || !m.Deleted {
				t.Errorf("executable mapping %x-%x is %v, deleted %v", m.Start, m.End, m.Class, m.Deleted)
			}
		case strings.HasPrefix(filepath.Base(m.Path), "libc.so") || strings.HasPrefix(filepath.Base(m.Path), "libc-"):
			libc = true
			if m.Class != ClassSharedLib {
				t.Errorf("libc mapping %x-%x %s is %v", m.Start, m.End, m.Path, m.Class)
			}
		case m.Path == "[vdso]":
			vdso = true
			if m.Class != ClassSpecial {
				t.Errorf("[vdso] is %v", m.Class)
			}
		}
	}
	if mainHeaps != 1 {
		t.Errorf("%d main heaps, want 1", mainHeaps)
	}
	if arenaHeaps < 3 {
		t.Errorf("%d aligned rw arena heaps, want at least 3", arenaHeaps)
	}
	if !exe || !libc || !vdso {
		t.Errorf("mappings seen: executable %v, libc %v, [vdso] %v; want all", exe, libc, vdso)
	}

	for tid, sp := range sps {
		want := ClassThreadStack
		if tid == pid {
			want = ClassMainStack
		}
		m, ok := Find(ms, sp)
		if !ok {
			t.Errorf("thread %d: sp %#x in no mapping", tid, sp)
		} else if m.Class != want {
			t.Errorf("thread %d: sp %#x in %x-%x, a %v; want %v", tid, sp, m.Start, m.End, m.Class, want)
		}
	}

	// The guard-page heuristic alone must find the same pthread stacks.
	noSP := append([]Mapping(nil), ms...)
	Classify(noSP, Hints{ExePath: h.ExePath})
	for i := range ms {
		if ms[i].Class != noSP[i].Class {
			t.Errorf("%x-%x: %v with stack pointers, %v without", ms[i].Start, ms[i].End, ms[i].Class, noSP[i].Class)
		}
	}

	var size, rss uint64
	for _, m := range ms {
		size += m.Size()
		rss += m.Rss
	}
	var rowSize uint64
	for _, r := range Summarize(ms) {
		rowSize += r.Size
	}
	if rowSize != size {
		t.Errorf("Summarize rows add up to %d bytes, mappings to %d", rowSize, size)
	}

	ru, err := ReadRollup(pid)
	if err != nil {
		t.Fatal(err)
	}
	// The target is parked, but the kernel may still fault in or reclaim
	// a page between the two reads.
	t.Logf("smaps_rollup Rss %d, sum of smaps Rss %d", ru.Rss, rss)
	diff := max(ru.Rss, rss) - min(ru.Rss, rss)
	if diff*100 > rss {
		t.Errorf("smaps_rollup Rss %d, sum of smaps Rss %d: more than 1%% apart", ru.Rss, rss)
	}
	if ru.Pss == 0 || ru.Anonymous == 0 {
		t.Errorf("smaps_rollup has zero counters: %+v", ru)
	}
}

func TestReadMissingProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	pid := cmd.Process.Pid // reaped, so gone unless the pid was reused
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Skip("pid reused")
	}
	if _, err := Read(pid, false); !errors.Is(err, procfs.ErrNoProcess) {
		t.Errorf("Read: %v, want ErrNoProcess", err)
	}
	if _, err := ReadRollup(pid); !errors.Is(err, procfs.ErrNoProcess) {
		t.Errorf("ReadRollup: %v, want ErrNoProcess", err)
	}
	if _, err := StackPointers(pid); !errors.Is(err, procfs.ErrNoProcess) {
		t.Errorf("StackPointers: %v, want ErrNoProcess", err)
	}
}

func TestReadSelf(t *testing.T) {
	pid := os.Getpid()
	plain, err := Read(pid, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) == 0 {
		t.Fatal("no mappings for this process")
	}
	for i := 1; i < len(plain); i++ {
		if plain[i].Start < plain[i-1].End {
			t.Errorf("mappings out of order or overlapping: %x-%x then %x-%x",
				plain[i-1].Start, plain[i-1].End, plain[i].Start, plain[i].End)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	code := uint64(reflect.ValueOf(TestReadSelf).Pointer())
	if m, ok := Find(plain, code); !ok || m.Path != exe || !m.Executable() {
		t.Errorf("code address %#x in %+v, want an r-x mapping of %s", code, m, exe)
	}
}

// TestReadDenied needs a process we may not ptrace; pid 1 is one when the
// tests run unprivileged or in a container, and the test skips otherwise.
func TestReadDenied(t *testing.T) {
	_, err := StackPointers(1)
	if err == nil {
		t.Skip("allowed to read pid 1's syscall files")
	}
	if !errors.Is(err, procfs.ErrPermission) {
		t.Errorf("StackPointers(1): %v, want ErrPermission", err)
	}
	if !strings.Contains(err.Error(), "process 1") || !strings.Contains(err.Error(), "/syscall") {
		t.Errorf("error %q does not name the pid and file", err)
	}
}

// Query finds the mapping holding an address from the kernel directly, as
// the full list shows it; an address in no mapping is ENOENT.
func TestQuery(t *testing.T) {
	ms, err := Read(os.Getpid(), false)
	if err != nil {
		t.Fatal(err)
	}
	// The test binary's text: a mapping nothing changes meanwhile.
	exe, _ := os.Executable()
	var m Mapping
	for _, x := range ms {
		if x.Path == exe && x.Executable() {
			m = x
		}
	}
	if m.End == 0 {
		t.Fatalf("no text mapping of %s", exe)
	}
	start, end, err := Query(os.Getpid(), m.Start+(m.End-m.Start)/2)
	if errors.Is(err, syscall.ENOTTY) {
		t.Skip("this kernel has no PROCMAP_QUERY (Linux 6.11)")
	}
	if err != nil || start != m.Start || end != m.End {
		t.Errorf("Query in %#x-%#x: %#x-%#x, %v", m.Start, m.End, start, end, err)
	}
	if _, _, err := Query(os.Getpid(), 0); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Query of address 0: %v, want ENOENT", err)
	}
}
