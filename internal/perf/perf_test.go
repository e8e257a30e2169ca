package perf_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/perf"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// toucher maps N MiB and writes one byte per page, in the thread asked
// for: "main N" in the main thread, "thread N" in a thread it creates then
// (after the events were opened: it must inherit them). It answers with
// the mapping's address.
const toucher = `
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static __attribute__((noinline)) void touch_pages(char *p, size_t n) {
	for (size_t i = 0; i < n; i += 4096) p[i] = 1;
}
static void *touch(long mib) {
	size_t n = (size_t)mib << 20;
	char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) return 0;
	touch_pages(p, n);
	return p;
}
static void *run(void *arg) { return touch((long)arg); }
static __attribute__((noinline)) long read_pages(volatile char *p, size_t n) {
	long sum = 0;
	for (size_t i = 0; i < n; i += 4096) sum += p[i];
	return sum;
}
/* Maps a file and reads it a byte a page: its pages come in by faults. */
static void *read_file(const char *path, long mib) {
	size_t n = (size_t)mib << 20;
	int fd = open(path, O_RDONLY);
	if (fd < 0) return 0;
	char *p = mmap(0, n, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) return 0;
	read_pages(p, n);
	return p;
}
int main(void) {
	char cmd[512], path[400];
	long n;
	setvbuf(stdout, 0, _IOLBF, 0);
	printf("ready\n");
	while (fgets(cmd, sizeof cmd, stdin)) {
		void *p = 0;
		if (sscanf(cmd, "main %ld", &n) == 1) p = touch(n);
		else if (sscanf(cmd, "file %ld %399s", &n, path) == 2) p = read_file(path, n);
		else if (sscanf(cmd, "maps %ld", &n) == 1) {
			/* n maps of a page, each written and unmapped */
			for (long i = 0; i < n; i++) {
				char *q = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				if (q == MAP_FAILED) break;
				q[0] = 1;
				munmap(q, 4096);
			}
		}
		else if (sscanf(cmd, "thread %ld", &n) == 1) {
			pthread_t t;
			pthread_create(&t, 0, run, (void *)n);
			pthread_join(t, &p);
		} else break;
		printf("%p %d\n", p, getpid());
	}
	return 0;
}
`

func TestSamplesOfEveryThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for perf events on another process")
	}
	bin := testutil.BuildCSource(t, "toucher", toucher)
	tg := testutil.Start(t, bin)
	tps, err := perf.Tracepoints("syscalls/sys_enter_mmap", "syscalls/sys_exit_mmap")
	if err != nil {
		t.Fatal(err)
	}
	if tps[0].Fields["len"].Offset != 24 || tps[1].Fields["ret"].Size != 8 {
		t.Fatalf("unexpected formats: %+v %+v", tps[0].Fields, tps[1].Fields)
	}
	events := []perf.Event{
		{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS, Period: 1, Stack: true, Addr: true},
		{Name: "mmap", Type: unix.PERF_TYPE_TRACEPOINT, Config: tps[0].ID, Period: 1, Stack: true, Raw: true},
		{Name: "mmap-exit", Type: unix.PERF_TYPE_TRACEPOINT, Config: tps[1].ID, Period: 1, Raw: true},
	}
	s, err := perf.Open(tg.Pid, events, perf.Options{RingPages: 1024, StackSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const mib = 3
	for _, where := range []string{"main", "thread"} {
		ans := strings.Fields(tg.Send(where + " " + strconv.Itoa(mib)))
		start, err := strconv.ParseUint(strings.TrimPrefix(ans[0], "0x"), 16, 64)
		if err != nil {
			t.Fatal(ans)
		}
		end := start + mib<<20
		var faults, inherited, withStack, mmaps, exits int
		var mmapTid int
		for _, smp := range s.Read() {
			if smp.Pid != tg.Pid {
				t.Fatalf("a sample of process %d", smp.Pid)
			}
			switch smp.Event {
			case 0:
				if smp.Addr >= start && smp.Addr < end {
					faults++
					if smp.Inherited {
						inherited++
					}
					if smp.HaveRegs && len(smp.Stack) > 0 && smp.Regs.SPOf(arch.Host()) != 0 {
						withStack++
					}
				}
			case 1:
				if tps[0].Uint(smp.Raw, "len") == mib<<20 {
					mmaps++
					mmapTid = smp.Tid
					if !smp.HaveRegs || len(smp.Stack) == 0 {
						t.Errorf("mmap sample without registers or stack")
					}
				}
			case 2:
				if uint64(tps[1].Int(smp.Raw, "ret")) == start {
					exits++
				}
			}
		}
		pages := mib << 20 / 4096
		if faults != pages || withStack != pages {
			t.Errorf("%s: %d faults in the mapping (%d with a stack), want %d", where, faults, withStack, pages)
		}
		if where == "thread" && (inherited != faults || mmapTid == tg.Pid) {
			t.Errorf("thread created in the window: %d of %d faults from inherited events, mmap by %d", inherited, faults, mmapTid)
		}
		if where == "main" && inherited != 0 {
			t.Errorf("main thread: %d faults counted as inherited", inherited)
		}
		if mmaps != 1 || exits != 1 {
			t.Errorf("%s: %d mmap entries and %d exits seen, want 1 each", where, mmaps, exits)
		}
	}
	if s.Lost != 0 {
		t.Errorf("%d records lost", s.Lost)
	}
}

func TestGoneProcess(t *testing.T) {
	_, err := perf.Open(1<<30, []perf.Event{{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS}}, perf.Options{})
	if !errors.Is(err, errkind.ErrNoProcess) {
		t.Fatalf("got %v, want errkind.ErrNoProcess", err)
	}
}

// attachMmapCalls records process pid's mmap and munmap calls by eBPF
// until the test ends.
func attachMmapCalls(t *testing.T, pid int) *perf.Calls {
	t.Helper()
	c, err := perf.OpenCalls(pid, perf.CallOptions{Nrs: []int{unix.SYS_MMAP, unix.SYS_MUNMAP}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Attach(); err != nil {
		t.Fatal(err)
	}
	return c
}

// While calls' programs are attached, another perf user of the same
// tracepoints (perf trace, perf record, another arenactl's growth
// --tracepoints) still gets every exit of every process: a tracepoint
// program that returns 0 gates the tracepoint's perf output for all of
// them. Before the programs returned 1, this session saw none.
func TestCallsLeaveOtherPerfUsersTheirExits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for eBPF and perf events on another process")
	}
	bin := testutil.BuildCSource(t, "toucher", toucher)
	tg := testutil.Start(t, bin)
	other := testutil.Start(t, bin)
	c := attachMmapCalls(t, other.Pid)
	tps, err := perf.Tracepoints("syscalls/sys_exit_mmap")
	if err != nil {
		t.Fatal(err)
	}
	s, err := perf.Open(tg.Pid, []perf.Event{{Name: "mmap-exit", Type: unix.PERF_TYPE_TRACEPOINT, Config: tps[0].ID, Period: 1, Raw: true}}, perf.Options{RingPages: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, where := range []string{"main", "thread"} {
		other.Send("main 1")
		ans := strings.Fields(tg.Send(where + " 1"))
		start, err := strconv.ParseUint(strings.TrimPrefix(ans[0], "0x"), 16, 64)
		if err != nil {
			t.Fatal(ans)
		}
		exits := 0
		for _, smp := range s.Read() {
			if uint64(tps[0].Int(smp.Raw, "ret")) == start {
				exits++
			}
		}
		if exits != 1 {
			t.Errorf("%s: %d exits of the mmap seen by a perf session beside calls' programs, want 1", where, exits)
		}
		c.Read(func(perf.Sample) {})
	}
}

// TestCallsRecordEveryCall: the eBPF program records each mmap of the
// process, in the main thread and in a thread created after it was
// attached, with its arguments, result and user registers, and no call of
// another process; a rare call's stack is copied whole.
func TestCallsRecordEveryCall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for eBPF")
	}
	bin := testutil.BuildCSource(t, "toucher", toucher)
	tg := testutil.Start(t, bin)
	other := testutil.Start(t, bin)
	c := attachMmapCalls(t, tg.Pid)
	for _, where := range []string{"main", "thread"} {
		other.Send("main 1")
		ans := strings.Fields(tg.Send(where + " 3"))
		start, err := strconv.ParseUint(strings.TrimPrefix(ans[0], "0x"), 16, 64)
		if err != nil {
			t.Fatal(ans)
		}
		var found []perf.Sample
		c.Read(func(smp perf.Sample) {
			if smp.Pid != tg.Pid {
				t.Errorf("a call of process %d", smp.Pid)
			}
			if smp.Call.Nr == unix.SYS_MMAP && smp.Call.Args[1] == 3<<20 {
				smp.Stack = append([]byte(nil), smp.Stack...)
				found = append(found, smp)
			}
		})
		if len(found) != 1 {
			t.Fatalf("%s: %d records of the 3 MiB mmap, want 1", where, len(found))
		}
		smp := found[0]
		if uint64(smp.Call.Ret) != start || smp.Call.Args[2] != unix.PROT_READ|unix.PROT_WRITE {
			t.Errorf("%s: mmap recorded as returning %#x with prot %d, want %#x, 3", where, smp.Call.Ret, smp.Call.Args[2], start)
		}
		if (where == "main") != (smp.Tid == tg.Pid) {
			t.Errorf("%s: recorded in thread %d of %d", where, smp.Tid, tg.Pid)
		}
		// Alone in the ring: nothing thins it. The copy is whole and
		// deep: 32 KiB, else 8, or all there is up to a page the
		// kernel could not read without a fault (above the main
		// thread's stack, pages of its mapping never touched): at
		// least the rest of sp's page, and ending where a page does.
		sp, n := smp.Regs.SPOf(arch.Host()), uint64(len(smp.Stack))
		rest := 4096 - sp%4096
		if smp.Call.Short || smp.Call.Thin != 0 || n < rest || n != perf.CallDeepStack && n != perf.CallWholeStack && (sp+n)%4096 != 0 || smp.Regs.PCOf(arch.Host()) == 0 {
			t.Errorf("%s: short %v thin %d, %d bytes of stack from sp %#x, pc %#x", where, smp.Call.Short, smp.Call.Thin, n, sp, smp.Regs.PCOf(arch.Host()))
		}
	}
	if n := c.Lost(); n != 0 {
		t.Errorf("%d calls lost", n)
	}
}

// TestCallsRecordFilePages: with RSS, the program records each change of
// the process's file page counter its own faults make (rss_stat), with
// the fault's registers and stack, and none of another process's; the
// last one's value is what /proc/PID/status says.
func TestCallsRecordFilePages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for eBPF")
	}
	bin := testutil.BuildCSource(t, "toucher", toucher)
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, bytes.Repeat([]byte{1}, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	tg := testutil.Start(t, bin)
	other := testutil.Start(t, bin)
	c, err := perf.OpenCalls(tg.Pid, perf.CallOptions{Nrs: []int{unix.SYS_MMAP}, RSS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, why := c.RSS(); !ok {
		t.Fatalf("rss_stat not recorded: %s", why)
	}
	if err := c.Attach(); err != nil {
		t.Fatal(err)
	}
	other.Send("file 8 " + file)
	tg.Send("file 8 " + file)
	var n int
	var last int64
	c.Read(func(smp perf.Sample) {
		if !smp.RSS.Set {
			return
		}
		if smp.Pid != tg.Pid || smp.RSS.Member != 0 {
			t.Errorf("a change of counter %d of process %d", smp.RSS.Member, smp.Pid)
		}
		sp := smp.Regs.SPOf(arch.Host())
		if len(smp.Stack) < int(4096-sp%4096) || smp.Regs.PCOf(arch.Host()) == 0 {
			t.Errorf("%d bytes of stack from sp %#x, pc %#x", len(smp.Stack), sp, smp.Regs.PCOf(arch.Host()))
		}
		n++
		last = smp.RSS.Pages
	})
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tg.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var status int64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &status)
		}
	}
	// Fault-around maps 16 pages a fault at least: 128 faults or fewer
	// for 8 MiB. The last value is the whole counter, every CPU's part
	// summed: the shared part alone was 16 pages short here. It may be
	// above what status says by pages the kernel reclaimed since (a
	// change the process did not make, not recorded).
	got := last * int64(os.Getpagesize())
	if n == 0 || n > 2048 || got < status<<10 || got > status<<10+1<<20 {
		t.Errorf("%d changes recorded, the last at %d pages; status says %d kB", n, last, status)
	}
	t.Logf("%d changes recorded, the last at %d pages", n, last)
	if l := c.Lost(); l != 0 {
		t.Errorf("%d records lost", l)
	}
}

// TestReadTakesTheCallsRingABiteAtATime: a read that is not the last
// takes at most MaxCallsRead calls and says more are pending; the reads
// that follow get the rest, every call once, and the samples of all the
// reads come in time order (the faults after the last call a read took
// are held back for the next).
func TestReadTakesTheCallsRingABiteAtATime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for eBPF and perf events on another process")
	}
	bin := testutil.BuildCSource(t, "toucher", toucher)
	tg := testutil.Start(t, bin)
	c, err := perf.OpenCalls(tg.Pid, perf.CallOptions{Nrs: []int{unix.SYS_MMAP, unix.SYS_MUNMAP}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := perf.Open(tg.Pid, []perf.Event{{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS,
		Period: 1, Stack: true, Addr: true}}, perf.Options{RingPages: 1024, StackSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.AddCalls(c)
	if err := c.Attach(); err != nil {
		t.Fatal(err)
	}
	const maps = 20000
	tg.Send(fmt.Sprintf("maps %d", maps))
	var calls, faults, reads int
	var last uint64
	take := func(smps []perf.Sample) {
		n := 0
		for _, smp := range smps {
			if smp.Time < last {
				t.Fatalf("read %d: a sample at %d after one at %d", reads, smp.Time, last)
			}
			last = smp.Time
			switch {
			case smp.Event < 0:
				n++
			case smp.Addr != 0:
				faults++
			}
		}
		if n > perf.MaxCallsRead {
			t.Fatalf("read %d took %d calls", reads, n)
		}
		calls += n
		reads++
	}
	for {
		take(s.ReadInto(nil, false))
		if !s.Pending() {
			break
		}
	}
	take(s.ReadInto(nil, true))
	if calls != 2*maps || c.Lost() != 0 || faults == 0 || reads < 3 {
		t.Errorf("%d calls (want %d), %d lost, %d faults in %d reads", calls, 2*maps, c.Lost(), faults, reads)
	}
}

// TestTwoSessions: two sessions on one process (two growth runs at once)
// each get every sample. The kernel stamps a software event's or a
// tracepoint's sample of every event but the first with the first's id,
// so the session opened first found ids it did not know on all its
// samples and dropped them: a second growth on the same process left the
// other with "page faults: 0 samples".
func TestTwoSessions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for perf events on another process")
	}
	bin := testutil.BuildCSource(t, "toucher", toucher)
	tg := testutil.Start(t, bin)
	tps, err := perf.Tracepoints("syscalls/sys_enter_mmap", "syscalls/sys_exit_mmap")
	if err != nil {
		t.Fatal(err)
	}
	events := []perf.Event{
		{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS, Period: 1, Stack: true, Addr: true},
		{Name: "mmap", Type: unix.PERF_TYPE_TRACEPOINT, Config: tps[0].ID, Period: 1, Stack: true, Raw: true},
		{Name: "mmap-exit", Type: unix.PERF_TYPE_TRACEPOINT, Config: tps[1].ID, Period: 1, Raw: true},
	}
	var ss []*perf.Session
	for i := 0; i < 2; i++ {
		// The second session asks for a shorter stack copy, as a run
		// with another --stack would.
		s, err := perf.Open(tg.Pid, events, perf.Options{RingPages: 1024, StackSize: uint32(4096 >> i)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ss = append(ss, s)
	}
	const mib = 3
	for _, where := range []string{"main", "thread"} {
		ans := strings.Fields(tg.Send(where + " " + strconv.Itoa(mib)))
		start, err := strconv.ParseUint(strings.TrimPrefix(ans[0], "0x"), 16, 64)
		if err != nil {
			t.Fatal(ans)
		}
		for i, s := range ss {
			var faults, mmaps, exits int
			for _, smp := range s.Read() {
				switch smp.Event {
				case 0:
					if smp.Addr >= start && smp.Addr < start+mib<<20 && smp.HaveRegs && len(smp.Stack) > 0 {
						faults++
					}
				case 1:
					if tps[0].Uint(smp.Raw, "len") == mib<<20 {
						mmaps++
					}
				case 2:
					if uint64(tps[1].Int(smp.Raw, "ret")) == start {
						exits++
					}
				}
			}
			if faults != mib<<20/4096 || mmaps != 1 || exits != 1 {
				t.Errorf("%s, session %d: %d faults with a stack, %d mmaps, %d exits; want %d, 1, 1",
					where, i, faults, mmaps, exits, mib<<20/4096)
			}
		}
	}
}

// TestCallsKeepToTheProcessStarted: the program knows its process by its
// start time too, so that a later process given the same PID is never
// recorded: told another start, it records none of the PID's calls.
func TestCallsKeepToTheProcessStarted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for eBPF")
	}
	bin := testutil.BuildCSource(t, "toucher", toucher)
	tg := testutil.Start(t, bin)
	st, err := procfs.ReadStat(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []uint64{st.StartTime + 1, st.StartTime} {
		c, err := perf.OpenCallsStarting(procfs.ByPid(tg.Pid), start, perf.CallOptions{Nrs: []int{unix.SYS_MMAP}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Attach(); err != nil {
			t.Fatal(err)
		}
		tg.Send("main 1")
		n := 0
		c.Read(func(smp perf.Sample) {
			if smp.Call.Nr == unix.SYS_MMAP && smp.Call.Args[1] == 1<<20 {
				n++
			}
		})
		c.Close()
		if want := map[bool]int{true: 1, false: 0}[start == st.StartTime]; n != want {
			t.Errorf("told the process started at %d (it did at %d): %d records of its 1 MiB mmap, want %d", start, st.StartTime, n, want)
		}
	}
}

// The committed object and Go types are what go generate's bpf2go makes
// of bpf/calls.c with this machine's clang (Debian 12's clang 14 and
// libbpf-dev made them). CI installs clang; elsewhere the test skips
// without it.
func TestCallsProgramIsBuiltFromSource(t *testing.T) {
	if _, err := exec.LookPath("clang"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI has no clang to rebuild bpf/calls.c")
		}
		t.Skip("no clang to rebuild bpf/calls.c")
	}
	src, err := os.ReadFile("calls.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	for _, l := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(l, "//go:generate go tool bpf2go "); ok {
			lines = append(lines, strings.Fields(rest))
		}
	}
	if len(lines) == 0 {
		t.Fatal("calls.go has no go:generate line for bpf2go")
	}
	// One line per machine (-target amd64, -target arm64), each with its
	// machine's asm/ptrace.h; bpf2go names the files by the target.
	for _, args := range lines {
		goarch := args[1]
		stem := map[string]string{"amd64": "calls_x86_bpfel", "arm64": "calls_arm64_bpfel"}[goarch]
		t.Run(goarch, func(t *testing.T) {
			if stem == "" {
				t.Fatalf("a bpf2go line for %q, which no committed object is for", goarch)
			}
			for _, a := range args {
				if inc, ok := strings.CutPrefix(a, "-I"); ok {
					if _, err := os.Stat(inc); err != nil {
						if os.Getenv("CI") != "" {
							t.Fatalf("CI has no %s (Debian: the %s cross compiler's headers)", inc, goarch)
						}
						t.Skipf("no %s to rebuild the %s object with", inc, goarch)
					}
				}
			}
			dir := t.TempDir()
			cmd := exec.Command("go", append([]string{"tool", "bpf2go", "-output-dir", dir}, args...)...)
			cmd.Env = append(os.Environ(), "GOPACKAGE=perf")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("bpf2go: %v\n%s", err, out)
			}
			for _, f := range []string{stem + ".o", stem + ".go"} {
				want, _ := os.ReadFile(filepath.Join(dir, f))
				got, _ := os.ReadFile(f)
				if len(want) == 0 || !bytes.Equal(got, want) {
					t.Errorf("%s is not what bpf2go builds from bpf/calls.c: run go generate ./internal/perf", f)
				}
			}
		})
	}
}

// TestBPFErrorKeepsTheVerifierLog: a program the verifier refuses is a
// refusal (errkind.ErrNoPerf: the calls go to perf's tracepoints) whose
// error still holds the verifier's whole log.
func TestBPFErrorKeepsTheVerifierLog(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for eBPF")
	}
	// R2 is read before it is written: refused.
	_, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.TracePoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Reg(asm.R0, asm.R2), asm.Return()}})
	if err == nil {
		t.Fatal("the verifier took a program that reads an unset register")
	}
	e := error(&perf.BPFError{Op: "loading the calls' eBPF program", Err: err})
	var ve *ebpf.VerifierError
	if !errors.As(e, &ve) || len(ve.Log) == 0 || !strings.Contains(strings.Join(ve.Log, "\n"), "R2 !read_ok") {
		t.Errorf("no verifier log in %v", e)
	}
	if !errors.Is(e, errkind.ErrNoPerf) {
		t.Errorf("%v is not errkind.ErrNoPerf", e)
	}
}

// TestCallsRingWraps: the calls' ring is read with its data mapped once
// (bpfring.go), so a record that runs past the ring's end is put together
// from its two ends. In a ring of four pages, records of 0.4 KiB and a few
// wrap at many offsets over 60 rounds of 4 maps and unmaps, each round
// read before the next: every call comes out once, in order, its
// registers and stack's length whole.
func TestCallsRingWraps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for eBPF")
	}
	bin := testutil.BuildCSource(t, "toucher", toucher)
	tg := testutil.Start(t, bin)
	c, err := perf.OpenCalls(tg.Pid, perf.CallOptions{Nrs: []int{unix.SYS_MMAP, unix.SYS_MUNMAP}, RingBytes: 4 * 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Attach(); err != nil {
		t.Fatal(err)
	}
	var sps [2]uint64 // mmap's and munmap's: one call site each
	var last uint64   // the address the last mmap returned
	calls, whole := 0, 0
	for round := 0; round < 60; round++ {
		tg.Send("maps 4")
		n := 0
		c.Read(func(smp perf.Sample) {
			k := 0
			switch {
			case smp.Call.Nr == unix.SYS_MMAP && smp.Call.Args[1] == 4096 && smp.Call.Ret > 0:
				if n%2 != 0 {
					t.Errorf("round %d: an mmap where an munmap was due", round)
				}
				last = uint64(smp.Call.Ret)
			case smp.Call.Nr == unix.SYS_MUNMAP && smp.Call.Args[1] == 4096:
				if n%2 != 1 || smp.Call.Args[0] != last {
					t.Errorf("round %d: munmap of %#x after an mmap returned %#x (record %d)", round, smp.Call.Args[0], last, n)
				}
				k = 1
			default:
				return // glibc's own, or the reply's
			}
			n++
			sp := smp.Regs.SPOf(arch.Host())
			if sps[k] == 0 {
				sps[k] = sp
			} else if sp != sps[k] {
				t.Errorf("round %d: a call's sp %#x, the same call's before %#x", round, sp, sps[k])
			}
			if !smp.Call.Short {
				whole++
			}
			// A whole copy ends where the stack's pages do, if
			// before its size (the main thread's stack is shallow).
			if l := uint64(len(smp.Stack)); smp.Call.Short && l != perf.CallShortStack || !smp.Call.Short && l != perf.CallWholeStack && (sp+l)%4096 != 0 {
				t.Errorf("round %d: %d bytes of stack from sp %#x (short %v)", round, l, sp, smp.Call.Short)
			}
		})
		if n != 8 {
			t.Fatalf("round %d: %d of the 8 calls read", round, n)
		}
		calls += n
	}
	if lost := c.Lost(); lost != 0 {
		t.Errorf("%d calls lost", lost)
	}
	t.Logf("%d calls, %d with a whole copy", calls, whole)
	if whole == 0 || whole == calls {
		t.Errorf("%d of %d calls copied whole: the records' sizes did not vary", whole, calls)
	}
}
