package inspect

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/procfs"
)

// NoThreadError: the thread named with --thread is not one of the
// process's. It is a missing target (errkind.ErrNoProcess, exit 3), but the
// process exists: saying "no such process" of it was wrong.
type NoThreadError struct{ Pid, Tid int }

func (e *NoThreadError) Error() string {
	return fmt.Sprintf("process %d has no thread %d (--thread): it lists its threads in /proc/%d/task", e.Pid, e.Tid, e.Pid)
}

func (e *NoThreadError) Is(target error) bool { return target == errkind.ErrNoProcess }

// checkThread checks that tid (0: none asked for) is a thread of the
// process p holds now, before anything is stopped.
func checkThread(p *procfs.Proc, tid int) error {
	if tid == 0 {
		return nil
	}
	if _, err := os.Stat(p.Path(fmt.Sprintf("task/%d", tid))); errors.Is(err, fs.ErrNotExist) || tid < 0 {
		return &NoThreadError{Pid: p.Pid, Tid: tid}
	}
	return nil
}
