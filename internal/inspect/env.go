package inspect

import (
	"strings"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/procfs"
)

// diagnoseEnv is what the diagnosis needs beyond a live process's report:
// its malloc settings from the environment and the CPU counts glibc sizes
// its arena limit by, read through p, the process's held directory
// (Options.Env). A process whose environment cannot be read gives none.
func diagnoseEnv(p *procfs.Proc) diagnose.Env {
	env, err := p.Environ()
	if err != nil {
		return diagnose.Env{}
	}
	e := diagnose.Env{OnlineCPUs: procfs.OnlineCPUs(), AffinityCPUs: p.AllowedCPUs(), Vars: map[string]string{}}
	for k, v := range env {
		if strings.HasPrefix(k, "MALLOC_") || k == "GLIBC_TUNABLES" {
			e.Vars[k] = v
		}
	}
	return e
}

// fillEnv gives o.Env, when asked for, the env of t, held.
func fillEnv(t *live.Target, o Options) {
	if o.Env != nil {
		*o.Env = diagnoseEnv(t.Proc())
	}
}
