package ptrace

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHurryPutsSchedulingBack: the tracer thread is real-time only between
// hurry and its restore, and comes back with the policy and nice value it
// had.
func TestHurryPutsSchedulingBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real-time scheduling needs CAP_SYS_NICE")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, 0, 3); err != nil {
		t.Fatal(err)
	}
	defer unix.Setpriority(unix.PRIO_PROCESS, 0, 0)
	restore := hurry(hurryFrom)
	during, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	restore()
	after, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if during.Policy != unix.SCHED_FIFO {
		// A container without a real-time budget refuses it: then
		// nothing may have changed.
		t.Logf("not made real-time (policy %d): refused here", during.Policy)
	}
	if after.Policy != unix.SCHED_NORMAL || after.Nice != 3 {
		t.Errorf("after: policy %d nice %d, want %d and 3", after.Policy, after.Nice, unix.SCHED_NORMAL)
	}
	r := hurry(hurryFrom - 1)
	if a, err := unix.SchedGetAttr(0, 0); err != nil || a.Policy != unix.SCHED_NORMAL {
		t.Errorf("a loop of %d threads made the tracer real-time (%v)", hurryFrom-1, err)
	}
	r()
}
