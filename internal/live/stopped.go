package live

// StoppedThreads lists the threads of the target, except one, that are
// stopped: state T (SIGSTOP and the like) or t (stopped by a tracer). A
// thread that exits meanwhile is left out.
func (t *Target) StoppedThreads(except int) ([]int, error) {
	tids, err := t.proc.Tasks()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, tid := range tids {
		if tid == except {
			continue
		}
		st, err := t.proc.ReadStatus(tid)
		if err != nil {
			continue
		}
		if st.State == 'T' || st.State == 't' {
			out = append(out, tid)
		}
	}
	return out, nil
}
