package walk

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
	jsonThread     = h.JSONThread
	jsonInfo       = h.JSONInfo
	jsonMapping    = h.JSONMapping
	jsonMapsReport = h.JSONMapsReport
	jsonFinding    = h.JSONFinding
	jsonSnapshot   = h.JSONSnapshot
	jsonDelta      = h.JSONDelta
	jsonClassDiff  = h.JSONClassDiff
	jsonDiff       = h.JSONDiff
)

var (
	run           = h.Run
	runCmd        = h.RunCmd
	runCmdStarted = h.RunCmdStarted
	mustRun       = h.MustRun
	mustQuit      = h.MustQuit
	runWithin     = h.RunWithin
	firstDiff     = h.FirstDiff
	ownReport     = h.OwnReport
	processState  = h.ProcessState
	thaw          = h.Thaw
	expectRefusal = h.ExpectRefusal
	within        = h.Within
	startGrow     = h.StartGrow
	mustGrow      = h.MustGrow
	decodeDoc     = h.DecodeDoc
)

const (
	exitOK          = h.ExitOK
	exitError       = h.ExitError
	exitUsage       = h.ExitUsage
	exitNoProcess   = h.ExitNoProcess
	exitPermission  = h.ExitPermission
	exitTraced      = h.ExitTraced
	exitNotGlibc    = h.ExitNotGlibc
	exitBadCore     = h.ExitBadCore
	exitNoMemory    = h.ExitNoMemory
	exitInterrupted = h.ExitInterrupted
	exitArch        = h.ExitArch
)
