package main

import (
	"os"
	"testing"

	h "github.com/arenactl/arenactl/e2e/harness"
)

// The tests spell the harness's names as they did when they were
// cmd/arenactl's (e2e/harness).

var arenactl string // the binary under test

func TestMain(m *testing.M) { os.Exit(h.Main(m, &arenactl)) }

var (
	run           = h.Run
	runCmd        = h.RunCmd
	mustRun       = h.MustRun
	mustQuit      = h.MustQuit
	processState  = h.ProcessState
	expectRefusal = h.ExpectRefusal
	within        = h.Within
)
