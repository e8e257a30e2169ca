package inspect

import (
	"context"

	"github.com/arenactl/arenactl/internal/growth"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/report"
)

// GrowthOptions say how long and how finely to watch (Window) besides
// what every live use case is told.
type GrowthOptions struct {
	Options
	Window growth.Options
}

// Growth watches a process's page faults and memory syscalls over the
// window (internal/growth) and charges them to call stacks and memory
// classes. Nothing is stopped in or placed in the process: the kernel
// samples it. So any allocator will do (its heaps are then not told apart
// by arena) and so will a process another tracer holds.
func Growth(ctx context.Context, pid int, o GrowthOptions) (_ *report.Growth, err error) {
	t, err := live.OpenObserved(pid)
	if err != nil {
		return nil, err
	}
	defer func() {
		err = t.Explain(err)
		t.Close()
	}()
	in := growth.Input{Target: t}
	if t.Libc == nil {
		in.NoArenas = (&live.NotGlibcError{Pid: t.Pid, Allocator: t.Allocator}).Error()
	} else {
		in.Libc = report.LibcOf(t.Libc)
		if h, err := heap.Open(t, t.Libc, heap.Options{DebugDirs: o.DebugDirs}); err == nil {
			in.Heap = h
		} else {
			in.NoArenas = err.Error()
		}
	}
	in.Modules = module.NewTable(t, o.DebugDirs...)
	fetchDebug(ctx, in.Modules, o.Note)
	w := o.Window
	w.Note = o.Note
	return growth.Watch(ctx, in, w)
}
