package main

import (
	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/inspect"
)

// diagnoseEnv gathers what the diagnosis needs beyond the report: for a live
// process its malloc environment and CPU counts; a core has neither.
func diagnoseEnv(arg string) diagnose.Env {
	if isCoreArg(arg) {
		return diagnose.Env{}
	}
	return inspect.DiagnoseEnv(parsePid([]string{arg}))
}
