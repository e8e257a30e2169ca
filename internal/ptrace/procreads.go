package ptrace

// The per-thread /proc files of an opened process, read through its held
// /proc directory (procfs.OpenProc): once the process has gone, they fail
// rather than name a later process given its pid. Counted in ProcReads as
// the pid-taking reads are.

// Tasks lists the process's thread ids, main thread first.
func (p *Process) Tasks() ([]int, error) {
	procReads.Add(1)
	return p.proc.Tasks()
}

// ReadStatus reads the status file of the process's thread tid.
func (p *Process) ReadStatus(tid int) (Status, error) {
	procReads.Add(1)
	ts, err := p.proc.ReadTaskStatus(tid)
	if err != nil {
		return Status{}, err
	}
	return statusOf(ts), nil
}

// ReadSyscall reads the syscall file of the process's thread tid.
func (p *Process) ReadSyscall(tid int) (SyscallState, error) {
	procReads.Add(1)
	return p.proc.ReadSyscall(tid)
}
