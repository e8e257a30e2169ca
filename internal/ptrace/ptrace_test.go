// The calls these tests make are injected on x86_64 only (call_arm64.go).

//go:build amd64

package ptrace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// fixture is testdata/ptrace_target.c running, with the addresses it printed.
type fixture struct {
	tg                           *testutil.Target
	add3, slow, block, spin, die uint64
	buf                          uint64
	worker                       int
	proc                         *Process
}

func start(t *testing.T) *fixture {
	t.Helper()
	tg := testutil.Start(t, testutil.BuildC(t, "ptrace_target.c"))
	f := strings.Fields(tg.Ready())
	if len(f) != 8 {
		t.Fatalf("ready line: %q", tg.Ready())
	}
	hex := func(i int) uint64 {
		v, err := strconv.ParseUint(f[i], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	fx := &fixture{tg: tg, add3: hex(1), slow: hex(2), block: hex(3), spin: hex(4), die: hex(5), buf: hex(6)}
	fx.worker, _ = strconv.Atoi(f[7])
	testutil.WaitUntil(t, "the main thread to block in read", func() bool { return syscallOf(tg.Pid, tg.Pid) == 0 })
	p, err := Open(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	fx.proc = p
	return fx
}

func syscallOf(pid, tid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
	n, err := strconv.Atoi(strings.Fields(string(b) + " x")[0])
	if err != nil {
		return -2
	}
	return n
}

// stopped seizes and stops one thread of the fixture.
func (fx *fixture) stopped(t *testing.T, tid int) *Thread {
	t.Helper()
	th, err := fx.proc.Seize(tid)
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	return th
}

// alive checks the target still answers, and returns its SIGUSR1 count.
func (fx *fixture) alive(t *testing.T) string {
	t.Helper()
	return fx.tg.Send("count")
}

var generous = CallLimits{Soft: 10 * time.Second, Hard: 30 * time.Second}

func TestCallAndRestoreExactly(t *testing.T) {
	fx := start(t)
	th := fx.stopped(t, fx.tg.Pid)
	before := th.Regs()
	if nr, ok := InSyscall(&before); !ok || nr != unix.SYS_READ {
		t.Fatalf("main thread: syscall %d, blocked %v; want blocked in read", nr, ok)
	}
	for i := int64(0); i < 3; i++ {
		got, err := th.Call(generous, fx.add3, 1, 2, uint64(i))
		if err != nil || got != uint64(3+i) {
			t.Fatalf("add3(1,2,%d) = %d, %v", i, got, err)
		}
	}
	if err := th.Restore(); err != nil {
		t.Fatal(err)
	}
	var after Regs
	var xs []byte
	err := fx.proc.t.do(func() error {
		if err := unix.PtraceGetRegs(th.Tid, &after); err != nil {
			return err
		}
		var err error
		xs, err = getXState(th.Tid)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The thread was parked in read: restored, it is about to issue it
	// again, as the kernel's restart would have it.
	want := before
	want.Rip -= 2
	want.Rax = before.Orig_rax
	want.Orig_rax = ^uint64(0)
	if after != want {
		t.Errorf("registers after restore differ:\nwant  %+v\nafter %+v", want, after)
	}
	if !bytes.Equal(xs, th.xstate) {
		t.Error("extended state after restore differs")
	}
	if err := th.Detach(); err != nil {
		t.Fatal(err)
	}
	if got := fx.alive(t); got != "0" {
		t.Fatalf("count = %q", got)
	}
	if line, code := fx.tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

func TestMemory(t *testing.T) {
	fx := start(t)
	b := make([]byte, 21)
	if _, err := fx.proc.ReadAt(b, fx.buf); err != nil || string(b) != "hello from the target" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := fx.proc.WriteAt([]byte("HELLO"), fx.buf); err != nil {
		t.Fatal(err)
	}
	fx.proc.ReadAt(b, fx.buf)
	if string(b) != "HELLO from the target" {
		t.Fatalf("after write: %q", b)
	}
	if _, err := fx.proc.ReadAt(b, 8); err == nil {
		t.Fatal("reading address 8 succeeded")
	}
}

// A fault inside the injected function is not the target's business: no
// signal reaches it and its thread resumes where it was.
func TestCallFaultIsNotDelivered(t *testing.T) {
	fx := start(t)
	th := fx.stopped(t, fx.tg.Pid)
	_, err := th.Call(generous, 0x10)
	var fe *FaultError
	if !errors.As(err, &fe) || fe.Signal != "SIGSEGV" || fe.PC != 0x10 {
		t.Fatalf("call to 0x10: %v", err)
	}
	if _, err := th.Call(generous, fx.add3); err == nil {
		t.Fatal("a thread whose call faulted accepted another call")
	}
	if err := th.Detach(); err != nil {
		t.Fatal(err)
	}
	if got := fx.alive(t); got != "0" {
		t.Fatalf("count = %q", got)
	}
}

// A signal that arrives for the borrowed thread during the call is held and
// delivered after the thread is given back, exactly once.
func TestSignalDuringCallIsDeliveredAfter(t *testing.T) {
	fx := start(t)
	th := fx.stopped(t, fx.tg.Pid)
	done := make(chan error, 1)
	go func() {
		got, err := th.Call(generous, fx.slow)
		if err == nil && got != 42 {
			err = fmt.Errorf("slow() = %d", got)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := unix.Tgkill(fx.tg.Pid, fx.tg.Pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := th.Detach(); err != nil {
		t.Fatal(err)
	}
	if got := fx.alive(t); got != "1" {
		t.Fatalf("SIGUSR1 count after the call = %q, want 1", got)
	}
}

func TestCallBlockedIsAbandonedAtSoftLimit(t *testing.T) {
	fx := start(t)
	th := fx.stopped(t, fx.tg.Pid)
	_, err := th.Call(CallLimits{Soft: 100 * time.Millisecond, Hard: 30 * time.Second}, fx.block)
	var te *TimeoutError
	if !errors.As(err, &te) || !te.Blocked || te.Syscall != unix.SYS_PAUSE || te.Cancelled {
		t.Fatalf("block(): %v", err)
	}
	if err := th.Detach(); err != nil {
		t.Fatal(err)
	}
	if got := fx.alive(t); got != "0" {
		t.Fatalf("count = %q", got)
	}
}

func TestCallCancelled(t *testing.T) {
	fx := start(t)
	th := fx.stopped(t, fx.tg.Pid)
	cancel := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(cancel) })
	_, err := th.Call(CallLimits{Soft: time.Minute, Hard: time.Minute, Cancel: cancel}, fx.block)
	var te *TimeoutError
	if !errors.As(err, &te) || !te.Blocked || !te.Cancelled {
		t.Fatalf("block(): %v", err)
	}
	th.Detach()
	fx.alive(t)
}

// Code that is still running at the soft limit may hold a lock: it is let
// finish rather than abandoned.
func TestCallRunningPastSoftLimitCompletes(t *testing.T) {
	fx := start(t)
	th := fx.stopped(t, fx.tg.Pid)
	got, err := th.Call(CallLimits{Soft: 20 * time.Millisecond, Hard: 30 * time.Second}, fx.spin, 300)
	if err != nil || got != 300 {
		t.Fatalf("spin(300) = %d, %v", got, err)
	}
	th.Detach()
	fx.alive(t)
}

// The borrowed thread ends during the call: the error says so and the rest
// of the process runs on.
func TestThreadExitsDuringCall(t *testing.T) {
	fx := start(t)
	th := fx.stopped(t, fx.worker)
	_, err := th.Call(generous, fx.die)
	if !errors.Is(err, ErrGone) {
		t.Fatalf("die(): %v", err)
	}
	if err := th.Detach(); err != nil {
		t.Fatalf("detach after the thread exited: %v", err)
	}
	fx.alive(t)
	if line, code := fx.tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

func TestOpenRefusals(t *testing.T) {
	if _, err := Open(99999999); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Open(99999999): %v", err)
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	testutil.WaitUntil(t, "a zombie", func() bool {
		st, err := ReadStatus(cmd.Process.Pid, cmd.Process.Pid)
		return err == nil && st.State == 'Z'
	})
	var se *StateError
	if _, err := Open(cmd.Process.Pid); !errors.As(err, &se) || !strings.Contains(err.Error(), "zombie") {
		t.Errorf("Open(zombie): %v", err)
	}
}

// As if arenactl died: the tracer lets go of the thread without restoring
// anything, once parked after a call and once in the middle of one (slow()
// sleeps 300 ms). The routine in the call site restores the thread by
// itself: its read() on stdin resumes and answers, and the site says so.
func TestCallSiteRestoresWithoutTracer(t *testing.T) {
	for _, mid := range []bool{false, true} {
		t.Run(fmt.Sprintf("mid-call=%v", mid), func(t *testing.T) {
			fx := start(t)
			th := fx.stopped(t, fx.tg.Pid)
			if got, err := th.Call(generous, fx.add3, 1, 2, 3); err != nil || got != 6 {
				t.Fatalf("add3 = %d, %v", got, err)
			}
			base, _, _ := th.Site()
			err := fx.proc.t.do(func() error {
				if mid {
					r := th.inj.exact
					r.Rip, r.Rsp, r.Orig_rax = fx.slow, th.inj.sp, ^uint64(0)
					if err := unix.PtraceSetRegs(th.Tid, &r); err != nil {
						return err
					}
					th.inj.seq++
					var w [8]byte
					w[0] = byte(th.inj.seq)
					th.p.WriteAt(w[:], base+hdrPending)
				}
				th.detached = true
				return unix.PtraceDetach(th.Tid)
			})
			if err != nil {
				t.Fatal(err)
			}
			fx.proc.mu.Lock()
			delete(fx.proc.threads, th.Tid) // gone from us, as with a dead tracer
			fx.proc.mu.Unlock()
			if got := fx.alive(t); got != "0" {
				t.Fatalf("count = %q", got)
			}
			var sites []SiteInfo
			testutil.WaitUntil(t, "the routine to restore the thread", func() bool {
				sites, _ = fx.proc.FindSites()
				return len(sites) == 1 && sites[0].Restored
			})
			if s := sites[0]; s.Addr != base || s.Pending != s.Done || s.Creator != os.Getpid() || !s.CreatorAlive() {
				t.Errorf("site: %+v", s)
			}
			if line, code := fx.tg.Quit(); line != "clean" || code != 0 {
				t.Fatalf("target: %q %d", line, code)
			}
		})
	}
}

// A run killed while its thread waited at its call site's gate leaves the
// thread there, in a ppoll of the routine, for up to the gate's wait. The
// next run must not borrow it there: its registers are the old routine's,
// so the new site would restore it into the old site, and a later run,
// finding the old site idle by its own header, removed it while the thread
// still had to pass through it (the thread then jumped into unmapped
// memory: SIGSEGV, found by TestSoakSelfChecking). Here the thread is put
// at the gate by hand, with a gate wait of an hour so that nothing depends
// on timing, and handed to a new Thread as to a new run.
func TestNoCallsOnAThreadInAnEarlierCallSite(t *testing.T) {
	fx := start(t)
	th := fx.stopped(t, fx.tg.Pid)
	if got, err := th.Call(generous, fx.add3, 1, 2, 3); err != nil || got != 6 {
		t.Fatalf("add3 = %d, %v", got, err)
	}
	base, _, _ := th.Site()
	in := th.inj
	var atGate Regs
	err := fx.proc.t.do(func() error {
		var hour [16]byte
		hour[0], hour[1] = 0x10, 0x0e // tv_sec 3600
		if _, err := th.p.WriteAt(hour[:], base+hdrTimeout); err != nil {
			return err
		}
		// The routine's state just before its ppoll, as after a call
		// returned into it: the call's stack slot popped.
		atGate = in.exact
		atGate.Rip, atGate.Rsp = in.restore-2, in.sp+8
		atGate.Rax, atGate.Rdi, atGate.Rsi, atGate.Rdx, atGate.R10, atGate.R8 = unix.SYS_PPOLL, 0, 0, base+hdrTimeout, 0, 8
		atGate.Orig_rax = ^uint64(0)
		if err := unix.PtraceSetRegs(th.Tid, &atGate); err != nil {
			return err
		}
		return unix.PtraceCont(th.Tid, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Forget it as ours: to this Process the site is now an earlier run's.
	fx.proc.mu.Lock()
	delete(fx.proc.threads, th.Tid)
	fx.proc.mu.Unlock()
	testutil.WaitUntil(t, "the thread to wait at the gate", func() bool { return syscallOf(fx.tg.Pid, fx.tg.Pid) == unix.SYS_PPOLL })
	th2 := &Thread{p: fx.proc, Tid: th.Tid}
	fx.proc.mu.Lock()
	fx.proc.threads[th.Tid] = th2
	fx.proc.mu.Unlock()
	if err := th2.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	r := th2.Regs()
	sites, err := fx.proc.FindSites()
	if err != nil || len(sites) != 1 || sites[0].Addr != base || !sites[0].Contains(r.Rip) {
		t.Fatalf("sites %+v, %v; thread at %#x", sites, err, r.Rip)
	}
	var ae *AtCallSiteError
	if err := fx.proc.SiteHolding(th2.Tid, &r); !errors.As(err, &ae) || ae.Site != base {
		t.Errorf("SiteHolding: %v", err)
	}
	got, err := th2.Call(generous, fx.add3, 1, 2, 3)
	if !errors.As(err, &ae) || ae.Site != base || ae.Tid != th2.Tid {
		t.Errorf("Call on a thread at an earlier site's gate: %d, %v", got, err)
	}
	if s, _, _ := th2.Site(); s != 0 {
		t.Errorf("a call site was made at %#x for a thread inside the one at %#x", s, base)
	}
	// Let it go with a gate that ends at once: the old routine restores
	// the thread by itself and its read on stdin resumes.
	err = fx.proc.t.do(func() error {
		var zero [16]byte
		_, err := th2.p.WriteAt(zero[:], base+hdrTimeout)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := th2.Detach(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the routine to restore the thread", func() bool {
		sites, _ = fx.proc.FindSites()
		return len(sites) == 1 && sites[0].Restored
	})
	if got := fx.alive(t); got != "0" {
		t.Fatalf("count = %q", got)
	}
	if line, code := fx.tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}
