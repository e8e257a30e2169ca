package procfs

import (
	"fmt"
	"os"
	"strconv"
)

// LiveDir is the directory that shows process pid's memory: /proc/PID/, or,
// when the main thread has exited (pthread_exit) while other threads run
// on, /proc/PID/task/TID/ of one of those. The main thread's own files then
// show no memory at all: an empty maps, no exe, no pagemap.
func LiveDir(pid int) (string, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return "", err
	}
	if !st.Exited() {
		return fmt.Sprintf("/proc/%d", pid), nil
	}
	ents, err := os.ReadDir(Path(pid, "task"))
	if err != nil {
		return "", Error(pid, err)
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/task/%d", pid, tid)
		b, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue
		}
		if tst, err := parseStat(pid, string(b)); err == nil && !tst.Exited() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("process %d has exited: %w", pid, ErrNoProcess)
}
