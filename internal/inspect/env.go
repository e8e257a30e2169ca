package inspect

import (
	"strings"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/procfs"
)

// DiagnoseEnv is what the diagnosis needs beyond a live process's report:
// its malloc settings from the environment and the CPU counts glibc sizes
// its arena limit by. A process whose environment cannot be read gives none.
func DiagnoseEnv(pid int) diagnose.Env {
	env, err := procfs.Environ(pid)
	if err != nil {
		return diagnose.Env{}
	}
	e := diagnose.Env{OnlineCPUs: procfs.OnlineCPUs(), AffinityCPUs: procfs.AllowedCPUs(pid), Vars: map[string]string{}}
	for k, v := range env {
		if strings.HasPrefix(k, "MALLOC_") || k == "GLIBC_TUNABLES" {
			e.Vars[k] = v
		}
	}
	return e
}
