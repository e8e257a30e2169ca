package profile

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/testutil"
)

// callsPrograms are the names of internal/perf/bpf/calls.c's programs,
// one per memory syscall's exit tracepoint.
var callsPrograms = map[string]bool{"exit_mmap": true, "exit_munmap": true, "exit_mremap": true,
	"exit_brk": true, "exit_madvise": true, "exit_mprotect": true}

// programIDs lists the eBPF programs loaded now.
func programIDs(t *testing.T) map[ebpf.ProgramID]bool {
	ids := map[ebpf.ProgramID]bool{}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ids
		}
		if err != nil {
			t.Skipf("listing eBPF programs: %v", err)
		}
		ids[next], id = true, next
	}
}

// TestGrowthSparesUnrelatedSyscalls: while a growth window is open on an
// idle process, the calls' eBPF programs run at the memory syscalls of
// every process (they keep only the target's), and at nothing else: a
// million getppid calls of another process (this test's) run them no
// more than the machine's own memory calls meanwhile, where a program at
// raw_syscalls:sys_exit (the earlier one) ran a million times more. The
// run counts are the kernel's (bpf_stats_enabled, the programs' run_cnt);
// a thousand mmap and munmap calls of this process show that they count.
func TestGrowthSparesUnrelatedSyscalls(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("eBPF and perf events on another process need root")
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Skipf("the kernel keeps no eBPF run counts: %v", err)
	}
	defer stats.Close()
	before := programIDs(t)
	tg := testutil.Start(t, testutil.BuildC(t, "grow_sites.c", "-O2"))
	cmd := exec.Command(arenactl, "growth", "--duration", "30s", strconv.Itoa(tg.Pid))
	var stderr growthBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}()
	testutil.WaitUntil(t, "the window to open", func() bool { return strings.Contains(stderr.String(), "window is open") })
	if strings.Contains(stderr.String(), "eBPF refused") {
		t.Skipf("growth did not use eBPF: %s", stderr.String())
	}
	var progs []*ebpf.Program
	for id := range programIDs(t) {
		if before[id] {
			continue
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		defer p.Close()
		if info, err := p.Info(); err == nil && callsPrograms[info.Name] {
			progs = append(progs, p)
		}
	}
	if len(progs) != len(callsPrograms) {
		t.Fatalf("found %d of growth's %d eBPF programs", len(progs), len(callsPrograms))
	}
	runs := func() (n uint64) {
		for _, p := range progs {
			st, err := p.Stats()
			if err != nil {
				t.Fatal(err)
			}
			n += st.RunCount
		}
		return n
	}

	r0 := runs()
	for range 1000 {
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			t.Fatal(err)
		}
		unix.Munmap(b)
	}
	r1 := runs()
	const calls = 1_000_000
	for range calls {
		syscall.Getppid()
	}
	r2 := runs()
	t.Logf("runs: %d over 2,000 memory calls of this process, %d over %d getppid", r1-r0, r2-r1, calls)
	if r1-r0 < 2000 {
		t.Errorf("the programs ran %d times over this process's 2,000 memory calls: not counted", r1-r0)
	}
	// What runs them meanwhile is the machine's own memory calls, a
	// few thousand a second on a shared machine.
	if r2-r1 > calls/10 {
		t.Errorf("the programs ran %d times over %d getppid calls of an unrelated process", r2-r1, calls)
	}
}
