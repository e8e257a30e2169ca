package inspect

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The diagnosis's environment is the process's own, read while the use
// case holds it (Options.Env; issue 30, part 3): its MALLOC_* and
// GLIBC_TUNABLES variables and no others, and the CPUs it may run on,
// from Info and ReadOnly alike.
func TestEnvReadWhileHeld(t *testing.T) {
	cmd := exec.Command(testutil.BuildC(t, "idle.c"))
	cmd.Env = append(os.Environ(), "MALLOC_ARENA_MAX=3", "GLIBC_TUNABLES=glibc.malloc.trim_threshold=1048576", "NOT_MALLOC=1")
	tg := testutil.StartCmd(t, cmd)
	ctx := context.Background()
	check := func(how string, env diagnose.Env) {
		t.Helper()
		if env.Vars["MALLOC_ARENA_MAX"] != "3" || env.Vars["GLIBC_TUNABLES"] != "glibc.malloc.trim_threshold=1048576" {
			t.Errorf("%s: vars %v", how, env.Vars)
		}
		if _, ok := env.Vars["NOT_MALLOC"]; ok {
			t.Errorf("%s: a variable glibc's malloc does not read: %v", how, env.Vars)
		}
		if env.AffinityCPUs <= 0 || env.OnlineCPUs <= 0 {
			t.Errorf("%s: CPUs %d of %d", how, env.AffinityCPUs, env.OnlineCPUs)
		}
	}
	var env diagnose.Env
	o := Options{Timeout: 10 * time.Second, Env: &env}
	if _, err := ReadOnly(ctx, tg.Pid, o, HoldWalk); err != nil {
		t.Fatal(err)
	}
	check("read-only", env)
	env = diagnose.Env{}
	if _, err := Info(ctx, tg.Pid, o); err != nil {
		t.Fatal(err)
	}
	check("info", env)
}
