package live_test

import (
	"context"
	"errors"
	"github.com/arenactl/arenactl/internal/arch"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/testutil"
)

// borrow borrows a thread of tgt (tid 0: let the package choose), looking
// for at most timeout, a retry budget and never a timing assertion. It is
// the one place in these tests that knows the borrow API.
func borrow(ctx context.Context, tgt *live.Target, tid int, timeout time.Duration) (*live.Session, error) {
	return tgt.Hijack(ctx, live.HijackOptions{Timeout: timeout, Tid: tid})
}

// call runs libc's function name in the borrowed thread.
func call(t *testing.T, tgt *live.Target, s *live.Session, name string, args ...uint64) uint64 {
	t.Helper()
	sym, ok := tgt.Libc.Lookup(name)
	if !ok {
		t.Fatalf("libc exports no %s", name)
	}
	r, err := s.Call(sym.Value, args...)
	if err != nil {
		t.Fatalf("%s in thread %d: %v", name, s.Tid, err)
	}
	return r
}

// stoppedOthers lists the stopped threads of pid but except, sorted, as
// Target.StoppedThreads does, seen from outside any Target.
func stoppedOthers(t *testing.T, pid, except int) []int {
	t.Helper()
	all, err := ptrace.Tasks(pid)
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, tid := range all {
		if st, err := ptrace.ReadStatus(pid, tid); err == nil && tid != except && (st.State == 'T' || st.State == 't') {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	return tids
}

// Each thread, whatever safe syscall it is parked in, can be borrowed: it
// alone is stopped, calls into libc run in it and return their value, and
// once released it carries on where it was, as the target's round shows.
func TestBorrowEachParkedThread(t *testing.T) {
	lt := startLive(t, "park")
	tgt := openLive(t, lt.Pid)
	for _, th := range lt.threads {
		budget := testutil.Patience
		if th.name == "sigwait" {
			budget = time.Second
		}
		s, err := borrow(context.Background(), tgt, th.tid, budget)
		var ns *live.NoSafeThreadError
		if th.name == "sigwait" && errors.As(err, &ns) {
			// Known today: a stop ends rt_sigtimedwait with EINTR rather
			// than a restart code (so do epoll_wait and semop with a
			// timeout), so the stopped thread looks like it runs code in
			// libc, and is refused. Refusing is safe; the target must
			// still work (its loop retries on EINTR).
			t.Logf("thread %s refused: %s", th.name, ns.Reasons[th.tid])
			allLetGo(t, lt.Pid)
			lt.check(t)
			continue
		}
		if err != nil {
			t.Fatalf("borrowing thread %s (%d): %v", th.name, th.tid, err)
		}
		want := map[string][]int64{"main": {unix.SYS_READ}, "nanosleep": sleeping, "poll": {pollNr()}, "condvar": {unix.SYS_FUTEX}}[th.name]
		if s.Tid != th.tid || !inject.SafeSyscall(s.Syscall) || !slices.Contains(want, s.Syscall) {
			t.Errorf("borrowed thread %d in syscall %d, want thread %s (%d) in one of %v", s.Tid, s.Syscall, th.name, th.tid, want)
		}
		if got := stoppedOthers(t, lt.Pid, 0); !slices.Equal(got, []int{th.tid}) {
			t.Errorf("stopped threads while %s is borrowed: %v, want only it", th.name, got)
		}
		if got := stoppedOthers(t, lt.Pid, th.tid); len(got) != 0 {
			t.Errorf("stopped threads other than the borrowed %s: %v", th.name, got)
		}
		if got := call(t, tgt, s, "getpid"); got != uint64(lt.Pid) {
			t.Errorf("getpid() in %s = %d, want %d", th.name, got, lt.Pid)
		}
		if got := call(t, tgt, s, "gettid"); got != uint64(th.tid) {
			t.Errorf("gettid() in %s = %d: the call ran in another thread than %d", th.name, got, th.tid)
		}
		if got := call(t, tgt, s, "labs", negative(123456789012)); got != 123456789012 {
			t.Errorf("labs(-123456789012) in %s = %d", th.name, int64(got))
		}
		if got := call(t, tgt, s, "atoi", lt.text); got != 12345 {
			t.Errorf("atoi(%q) in %s = %d", "12345", th.name, got)
		}
		if _, err := s.Release(); err != nil {
			t.Fatalf("releasing %s: %v", th.name, err)
		}
		if _, err := s.Release(); err != nil {
			t.Errorf("a second release of %s: %v", th.name, err)
		}
		allLetGo(t, lt.Pid)
		if got := stoppedOthers(t, lt.Pid, 0); len(got) != 0 {
			t.Errorf("stopped threads after %s was released: %v", th.name, got)
		}
		lt.check(t)
	}
	lt.quit(t)
}

// Left to choose, the package borrows a thread parked in a safe syscall.
func TestBorrowChooses(t *testing.T) {
	lt := startLive(t, "park")
	tgt := openLive(t, lt.Pid)
	s, err := borrow(context.Background(), tgt, 0, testutil.Patience)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(lt.threads, func(th targetThread) bool { return th.tid == s.Tid }) || !inject.SafeSyscall(s.Syscall) {
		t.Errorf("borrowed thread %d in syscall %d; want one of %+v, in a safe syscall", s.Tid, s.Syscall, lt.threads)
	}
	if got := call(t, tgt, s, "gettid"); got != uint64(s.Tid) {
		t.Errorf("gettid() = %d in thread %d", got, s.Tid)
	}
	if _, err := s.Release(); err != nil {
		t.Fatal(err)
	}
	allLetGo(t, lt.Pid)
	lt.check(t)
	lt.quit(t)
}

// A borrow already cancelled stops nothing and says so.
func TestBorrowCancelled(t *testing.T) {
	lt := startLive(t, "park")
	tgt := openLive(t, lt.Pid)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := borrow(ctx, tgt, 0, testutil.Patience); !errors.Is(err, context.Canceled) {
		if s != nil {
			s.Release()
		}
		t.Errorf("borrow with a cancelled context: %v, want context.Canceled", err)
	}
	allLetGo(t, lt.Pid)
	lt.check(t)
	lt.quit(t)
}

// Threads that may be inside the allocator are refused, each with its
// reason, and let go untouched: one running a signal handler, one blocked
// writing while malloc_stats holds main_arena's lock, and the main thread
// inside malloc, waiting on that lock (a futex in libc's data). Left to
// choose, the package takes one of the two safe ones.
func TestBorrowRefusesUnsafeThreads(t *testing.T) {
	cmd := exec.Command(testutil.BuildC(t, "policy_target.c"))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.Stderr = pw // never read: malloc_stats blocks in write holding main_arena's lock
	tg := testutil.StartCmd(t, cmd)
	pw.Close()
	tid := map[string]int{}
	f := strings.Fields(tg.Ready())
	for i := 1; i+1 < len(f); i += 2 {
		tid[f[i]], _ = strconv.Atoi(f[i+1])
	}
	testutil.WaitUntil(t, "main to wait for main_arena's lock", func() bool { return inSyscall(tg.Pid, tg.Pid, unix.SYS_FUTEX) })
	testutil.WaitUntil(t, "stats to block in write", func() bool { return inSyscall(tg.Pid, tid["stats"], unix.SYS_WRITE) })
	tgt := openLive(t, tg.Pid)

	for _, c := range []struct {
		name string
		why  []string // the reason mentions one of these
	}{
		{"handler", []string{"signal handler"}},
		{"stats", []string{"syscall 1,", "write"}},
		{"main", []string{"lock in libc", "inside the allocator"}},
	} {
		// A refusal does not depend on time: one look is enough, and the
		// budget only bounds the retries.
		s, err := borrow(context.Background(), tgt, tid[c.name], 200*time.Millisecond)
		if err == nil {
			s.Release()
			t.Errorf("%s was borrowed", c.name)
			continue
		}
		var ns *live.NoSafeThreadError
		if !errors.As(err, &ns) {
			t.Errorf("%s: %v, want a NoSafeThreadError", c.name, err)
			continue
		}
		why := ns.Reasons[tid[c.name]]
		if !slices.ContainsFunc(c.why, func(w string) bool { return strings.Contains(why, w) }) {
			t.Errorf("%s refused because %q, want a reason naming one of %q", c.name, why, c.why)
		}
		if !strings.Contains(err.Error(), strconv.Itoa(tid[c.name])) {
			t.Errorf("%s: the error does not name its thread: %v", c.name, err)
		}
		allLetGo(t, tg.Pid)
	}

	s, err := borrow(context.Background(), tgt, 0, testutil.Patience)
	if err != nil {
		t.Fatal(err)
	}
	if s.Tid != tid["sleeper"] && s.Tid != tid["condvar"] {
		t.Errorf("borrowed thread %d; want sleeper (%d) or condvar (%d)", s.Tid, tid["sleeper"], tid["condvar"])
	}
	if got := call(t, tgt, s, "getpid"); got != uint64(tg.Pid) {
		t.Errorf("getpid() = %d, want %d", got, tg.Pid)
	}
	if _, err := s.Release(); err != nil {
		t.Fatal(err)
	}
	allLetGo(t, tg.Pid)
	// Every thread goes back where it was.
	futex, write := []int64{unix.SYS_FUTEX}, []int64{unix.SYS_WRITE}
	for name, want := range map[string][]int64{"main": futex, "stats": write, "handler": sleeping, "sleeper": sleeping, "condvar": futex} {
		testutil.WaitUntil(t, name+" to be back in its syscall", func() bool { return inSyscall(tg.Pid, tid[name], want...) })
	}
}

// sleeping are the syscalls of a thread in nanosleep: glibc's calls
// clock_nanosleep, which a stop restarts as restart_syscall.
var sleeping = []int64{unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP, unix.SYS_RESTART_SYSCALL}

// inSyscall reports whether /proc says thread tid of pid is blocked in one
// of the syscalls nrs.
func inSyscall(pid, tid int, nrs ...int64) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/syscall")
	nr, err := strconv.ParseInt(strings.Fields(string(b) + " x")[0], 10, 64)
	return err == nil && slices.Contains(nrs, nr)
}

// StoppedThreads sees a process stopped by a signal (job control) as well
// as a thread stopped by a tracer.
func TestStoppedThreadsJobControl(t *testing.T) {
	lt := startLive(t, "park")
	if err := unix.Kill(lt.Pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var others []int
	for _, th := range lt.threads[1:] {
		others = append(others, th.tid)
	}
	slices.Sort(others)
	testutil.WaitUntil(t, "every thread to stop", func() bool { return slices.Equal(stoppedOthers(t, lt.Pid, lt.Pid), others) })
	if err := unix.Kill(lt.Pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "every thread to go on", func() bool { return len(stoppedOthers(t, lt.Pid, 0)) == 0 })
	lt.check(t)
	lt.quit(t)
}

// negative is -n as a register holds it.
func negative(n int64) uint64 { return uint64(-n) }

// With no thread safe to borrow (the only one blocks writing to a pipe
// nobody reads: write may be malloc_stats printing under an arena lock),
// the borrow gives up when its budget is spent, saying why for each thread,
// and the process is left as it was.
func TestBorrowNoSafeThread(t *testing.T) {
	cmd := exec.Command(testutil.BuildC(t, "idle.c"), "write")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.Stderr = pw
	tg := testutil.StartCmd(t, cmd)
	pw.Close()
	testutil.WaitUntil(t, "the target to block in write", func() bool { return inSyscall(tg.Pid, tg.Pid, unix.SYS_WRITE) })
	tgt := openLive(t, tg.Pid)
	s, err := borrow(context.Background(), tgt, 0, 200*time.Millisecond)
	var ns *live.NoSafeThreadError
	if !errors.As(err, &ns) {
		if s != nil {
			s.Release()
		}
		t.Fatalf("%v, want a NoSafeThreadError", err)
	}
	if ns.Pid != tg.Pid || len(ns.Reasons) != 1 || ns.Reasons[tg.Pid] == "" {
		t.Errorf("pid %d, reasons %v; want process %d's one thread with its reason", ns.Pid, ns.Reasons, tg.Pid)
	}
	allLetGo(t, tg.Pid)
	testutil.WaitUntil(t, "the target to be back in write", func() bool { return inSyscall(tg.Pid, tg.Pid, unix.SYS_WRITE) })
}

// pollNr is the syscall glibc's poll makes: poll, or ppoll where the
// machine has no poll (aarch64).
func pollNr() int64 {
	if nr, ok := arch.Host().Sys("poll"); ok {
		return int64(nr)
	}
	return int64(arch.Host().MustSys("ppoll"))
}
