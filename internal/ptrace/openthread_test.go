// Its fixture is ptrace_test.go's, built for x86_64 only.

//go:build amd64

package ptrace

import "testing"

// Open given the id of a thread that is not the main one opens the whole
// process, its /proc directory held (issue 30, part 3: the directory is
// held before the status naming the thread group is read, then the
// group's, in which the thread must be found).
func TestOpenByAnotherThreadsId(t *testing.T) {
	fx := start(t)
	pid, tid := fx.tg.Pid, fx.worker
	if tid == 0 || tid == pid {
		t.Fatalf("worker thread %d of process %d", tid, pid)
	}
	p, err := Open(tid)
	if err != nil {
		t.Fatalf("Open(%d), a thread of process %d: %v", tid, pid, err)
	}
	defer p.Close()
	if p.Pid != pid || p.Proc().Pid != pid {
		t.Errorf("Open(%d): process %d, directory of %d; want %d", tid, p.Pid, p.Proc().Pid, pid)
	}
	tids, err := p.Tasks()
	if err != nil || len(tids) < 2 || tids[0] != pid {
		t.Fatalf("tasks through the held directory: %v, %v", tids, err)
	}
	found := false
	for _, x := range tids {
		found = found || x == tid
	}
	if !found {
		t.Errorf("thread %d not among %v", tid, tids)
	}
	if st, err := p.ReadStatus(tid); err != nil || st.Tgid != pid {
		t.Errorf("the thread's status through the held directory: %+v, %v", st, err)
	}
}
