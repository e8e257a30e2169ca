package inject

import (
	"github.com/arenactl/arenactl/internal/testutil"

	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRefuseUsage(t *testing.T) {
	expectRefusal(t, run(t, "info"), exitUsage, "one process id")
	expectRefusal(t, run(t, "info", "abc"), exitUsage, `"abc" is neither a process id nor a readable core file`)
	expectRefusal(t, run(t, "trim", "abc"), exitUsage, `"abc" is not a process id`)
	expectRefusal(t, run(t, "trim", "--pad", "x", "1"), exitUsage, "--pad")
	expectRefusal(t, run(t, "frobnicate", "1"), exitUsage, "unknown command")
}

func TestRefuseNoSuchProcess(t *testing.T) {
	// Above the kernel's pid_max, so it can never exist.
	for _, cmd := range []string{"info", "trim", "maps", "leaks"} {
		expectRefusal(t, run(t, cmd, "99999999"), exitNoProcess, "process 99999999", "no such process")
	}
}

func TestRefuseKernelThread(t *testing.T) {
	b, err := os.ReadFile("/proc/2/status")
	if err != nil || !strings.Contains(string(b), "kthreadd") {
		t.Skip("PID 2 is not kthreadd here (a PID namespace)")
	}
	// Every command that takes a PID says the same (maps said "target
	// exited", exit 10: smaps_rollup of a kernel thread fails with ESRCH).
	for _, args := range [][]string{{"info"}, {"info", "--read-only"}, {"trim"}, {"maps"}, {"maps", "--json"},
		{"snapshot", "-o", filepath.Join(t.TempDir(), "s")}, {"watch", "--count", "1"}, {"leaks", "--duration", "1s"},
		{"growth", "--duration", "1s"}, {"heap"}} {
		expectRefusal(t, run(t, append(args, "2")...), exitState, "process 2 is a kernel thread")
	}
}

func TestRefuseZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	// Not reaped: until Wait, the exited child stays a zombie of this test.
	for i := 0; ; i++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if strings.Contains(string(b), ") Z ") {
			break
		}
		if i > 1000 {
			t.Fatal("child never became a zombie")
		}
		time.Sleep(5 * time.Millisecond)
	}
	expectRefusal(t, run(t, "info", fmt.Sprint(cmd.Process.Pid)), exitState, "zombie")
}

func TestRefuseStatic(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libc.a"); err != nil {
		t.Skip("no static libc (libc6-dev)")
	}
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c", "-static"))
	expectRefusal(t, run(t, "info", fmt.Sprint(tg.Pid)), exitNotGlibc, "statically linked")
	expectRefusal(t, run(t, "leaks", fmt.Sprint(tg.Pid)), exitNotGlibc, "statically linked")
	mustQuit(t, tg)
}

func TestRefuseJemalloc(t *testing.T) {
	const lib = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
	if _, err := os.Stat(lib); err != nil {
		t.Skip("libjemalloc2 is not installed")
	}
	cmd := exec.Command(testutil.BuildC(t, "idle.c"))
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	tg := testutil.StartCmd(t, cmd)
	expectRefusal(t, run(t, "trim", fmt.Sprint(tg.Pid)), exitNotGlibc, "jemalloc", "not glibc malloc")
	expectRefusal(t, run(t, "leaks", fmt.Sprint(tg.Pid)), exitNotGlibc, "jemalloc", "not glibc malloc")
	mustQuit(t, tg)
}

func TestRefuseMusl(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildCWith(t, "musl-gcc", "idle.c"))
	expectRefusal(t, run(t, "info", fmt.Sprint(tg.Pid)), exitNotGlibc, "uses musl libc, not glibc")
	expectRefusal(t, run(t, "leaks", fmt.Sprint(tg.Pid)), exitNotGlibc, "uses musl libc, not glibc")
	tg.Quit()
}

func TestRefuseAlreadyTraced(t *testing.T) {
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		t.Skip("gdb is not installed")
	}
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c"))
	g := exec.Command(gdb, "-q", "-nx", "-batch", "-p", fmt.Sprint(tg.Pid), "-ex", "shell sleep 60")
	g.Stdout, g.Stderr = io.Discard, io.Discard
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { g.Process.Signal(syscall.SIGTERM); g.Wait() }()
	for i := 0; !testutil.Traced(tg.Pid); i++ {
		if i > 2000 {
			t.Fatal("gdb never attached")
		}
		time.Sleep(10 * time.Millisecond)
	}
	expectRefusal(t, run(t, "info", fmt.Sprint(tg.Pid)), exitTraced, "already traced by process", "gdb")
	expectRefusal(t, run(t, "leaks", fmt.Sprint(tg.Pid)), exitTraced, "already traced by process", "gdb")
}

func TestRefuseNoPermission(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run arenactl as another user")
	}
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c"))
	for _, verb := range []string{"info", "leaks"} {
		cmd := exec.Command(arenactl, verb, fmt.Sprint(tg.Pid))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		expectRefusal(t, runCmd(t, cmd), exitPermission, "permission denied", "same user")
	}
	tg.Quit()
}

// A process whose only thread is blocked writing (malloc_stats writes while
// holding an arena lock, so write is never safe): refused after --timeout,
// with the reason per thread.
func TestRefuseNoSafeThread(t *testing.T) {
	cmd := exec.Command(testutil.BuildC(t, "idle.c"), "write")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.Stderr = pw
	tg := testutil.StartCmd(t, cmd)
	pw.Close()
	for i := 0; ; i++ { // until the pipe is full and the write blocks
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", tg.Pid))
		if strings.HasPrefix(string(b), "1 ") {
			break
		}
		if i > 2000 {
			t.Fatalf("target never blocked in write: %s", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := run(t, "info", "--timeout", "300ms", fmt.Sprint(tg.Pid))
	expectRefusal(t, r, exitNoSafe, "no thread of process", "safe to borrow", "syscall 1")
}

// A process under a seccomp filter: leaks refuses (a sample makes
// syscalls a filter may punish), and so does --freeze image (a clone);
// --read-only falls back to stopping every thread for the walk and says
// why.
func TestRefuseSeccomp(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "seccomp.c"))
	pid := fmt.Sprint(tg.Pid)
	expectRefusal(t, run(t, "leaks", pid), exitNoSampler, "seccomp")
	expectRefusal(t, run(t, "info", "--read-only", "--freeze", "image", pid), exitNoImage, "seccomp")
	// heap's scan takes seconds on a large heap: it never stops the
	// process for it unless told to.
	expectRefusal(t, run(t, "heap", pid), exitNoImage, "seccomp", "--freeze walk")
	if s := processState(tg.Pid); s == 'T' || s == 't' {
		t.Errorf("the target is stopped (state %c) after heap refused", s)
	}
	if r := mustRun(t, "heap", "--freeze", "walk", pid); !strings.Contains(r.Stdout, "the process stopped for the read") {
		t.Errorf("heap --freeze walk does not say how it held the process:\n%s", r.Stdout)
	}
	if r := mustRun(t, "info", "--read-only", pid); !strings.Contains(r.Stdout, "seccomp") {
		t.Errorf("the frozen fallback does not say why:\n%s", r.Stdout)
	}
	mustQuit(t, tg)
}
