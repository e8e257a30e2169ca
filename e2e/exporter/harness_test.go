package exporter

import (
	"os"
	"testing"

	h "github.com/arenactl/arenactl/e2e/harness"
)

// The tests spell the harness's names as they did when they were
// cmd/arenactl's (e2e/harness).

var arenactl string // the binary under test

func TestMain(m *testing.M) { os.Exit(h.Main(m, &arenactl)) }

type result = h.Result

type (
	jsonInfo = h.JSONInfo
)

var (
	run           = h.Run
	runCmd        = h.RunCmd
	mustRun       = h.MustRun
	mustQuit      = h.MustQuit
	eventually    = h.Eventually
	fileExists    = h.FileExists
	ownReport     = h.OwnReport
	processState  = h.ProcessState
	thaw          = h.Thaw
	expectRefusal = h.ExpectRefusal
	within        = h.Within
	decodeDoc     = h.DecodeDoc
)

const (
	exitError = h.ExitError
	exitUsage = h.ExitUsage
)
