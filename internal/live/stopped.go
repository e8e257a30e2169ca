package live

import "github.com/arenactl/arenactl/internal/ptrace"

// StoppedThreads lists the threads of pid, except one, that are stopped:
// state T (SIGSTOP and the like) or t (stopped by a tracer). A thread that
// exits meanwhile is left out.
func StoppedThreads(pid, except int) ([]int, error) {
	tids, err := ptrace.Tasks(pid)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, tid := range tids {
		if tid == except {
			continue
		}
		st, err := ptrace.ReadStatus(pid, tid)
		if err != nil {
			continue
		}
		if st.State == 'T' || st.State == 't' {
			out = append(out, tid)
		}
	}
	return out, nil
}
