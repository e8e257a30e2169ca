package live

import (
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/target"
)

// Process is the live process: its pid and executable. Its short name is
// not read: no report of a live process shows it.
func (t *Target) Process() target.Process { return target.Process{Pid: t.Pid, Exe: t.Exe} }

// Mappings are the mappings as last read, classified: at Open, by Refresh,
// and again once a Freeze has stopped every thread.
func (t *Target) Mappings() []maps.Mapping { return t.mappings }

// Threads are the threads of the current freeze with their registers; none
// while nothing is frozen, since a running thread's registers mean nothing
// a moment later.
func (t *Target) Threads() []target.Thread {
	if t.frozen == nil {
		return nil
	}
	out := make([]target.Thread, 0, len(t.frozen.threads))
	for _, th := range t.frozen.threads {
		r := th.Regs()
		out = append(out, target.Thread{Tid: th.Tid, PC: r.Rip, SP: r.Rsp, FsBase: r.Fs_base, Regs: core.RegsOf(&r)})
	}
	return out
}

var _ target.Target = (*Target)(nil)
