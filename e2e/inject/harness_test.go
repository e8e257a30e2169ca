package inject

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
	jsonInjection   = h.JSONInjection
	jsonInfo        = h.JSONInfo
	jsonTrim        = h.JSONTrim
	jsonWatchSample = h.JSONWatchSample
)

var (
	run              = h.Run
	runCmd           = h.RunCmd
	mustRun          = h.MustRun
	mustQuit         = h.MustQuit
	runWithin        = h.RunWithin
	eventually       = h.Eventually
	firstDiff        = h.FirstDiff
	processState     = h.ProcessState
	expectRefusal    = h.ExpectRefusal
	within           = h.Within
	startGrow        = h.StartGrow
	mustGrow         = h.MustGrow
	stoppedThreads   = h.StoppedThreads
	markedMappings   = h.MarkedMappings
	unexplainedSites = h.UnexplainedSites
	decodeDoc        = h.DecodeDoc
)

const (
	exitOK          = h.ExitOK
	exitUsage       = h.ExitUsage
	exitNoProcess   = h.ExitNoProcess
	exitPermission  = h.ExitPermission
	exitTraced      = h.ExitTraced
	exitState       = h.ExitState
	exitNotGlibc    = h.ExitNotGlibc
	exitNoSafe      = h.ExitNoSafe
	exitCallFailed  = h.ExitCallFailed
	exitGone        = h.ExitGone
	exitDamaged     = h.ExitDamaged
	exitLockedStop  = h.ExitLockedStop
	exitNoImage     = h.ExitNoImage
	exitNoSampler   = h.ExitNoSampler
	exitInterrupted = h.ExitInterrupted
)
