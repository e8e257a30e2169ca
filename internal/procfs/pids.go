package procfs

import (
	"os"
	"strconv"
)

// Pids lists the processes /proc shows now (its numeric entries), in no
// particular order. A process may exit as soon as it is listed: every
// later read of one of its files must expect ErrNoProcess.
func Pids() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
