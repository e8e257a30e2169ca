package unwind_test

import (
	"os/exec"
	"testing"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/testutil"
	"github.com/arenactl/arenactl/internal/unwind"
)

// TestUnwindCore unwinds the parked chain from a kernel core of the
// target: the same code reads a core.Target (files under a sysroot, a
// core's mappings) as a live one.
func TestUnwindCore(t *testing.T) {
	b := buildChain(t, "pie", chainVariants[0].flags...)
	testutil.EnableCores(t)
	dir := t.TempDir()
	cmd := exec.Command(b.exe)
	cmd.Dir = dir
	ct := startChainCmd(t, cmd)
	ct.Stdin().Write([]byte("crash\n"))
	ct.Wait()
	ctg, err := core.OpenTarget(testutil.CoreOf(t, dir, ct.Pid), "/")
	if err != nil {
		t.Fatal(err)
	}
	defer ctg.Close()
	var regs unwind.Start
	for _, th := range ctg.Core.Threads {
		if th.Tid == ct.chainTid {
			regs = unwind.Start{Regs: th.Regs, HaveCalleeSaved: true}
		}
	}
	if regs.Regs.PCOf(host) == 0 {
		t.Fatalf("thread %d not in the core", ct.chainTid)
	}
	buf := make([]byte, 16<<10)
	n, _ := ctg.ReadAt(buf, regs.Regs.SPOf(host))
	if n == 0 {
		t.Fatal("the core holds nothing at the chain thread's sp")
	}
	mods := module.NewTable(ctg, b.debugDir)
	defer mods.Close()
	tr := unwind.New(mods).Unwind(regs, unwind.Stack{Addr: regs.Regs.SPOf(host), Data: buf[:n]})
	fs := symbolizeTrace(symbolize.New(mods), tr)
	ctx := dump(fs, tr)
	t.Logf("\n%s", ctx)
	i := indexOf(fs, "leaf_wait", 0)
	expectRun(t, fs, i, []string{"leaf_wait", "nd::d", "lib::c", "b<int>::step", "a::runner::run", "chain_main"}, ctx)
	if tr.Stop != unwind.StopEnd {
		t.Errorf("stopped with %s", tr.Stop)
	}
}
