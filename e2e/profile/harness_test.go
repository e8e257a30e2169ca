package profile

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
	jsonInjection = h.JSONInjection
	jsonInfo      = h.JSONInfo
	jsonTrim      = h.JSONTrim
)

var (
	run              = h.Run
	runCmd           = h.RunCmd
	mustRun          = h.MustRun
	eventually       = h.Eventually
	fileExists       = h.FileExists
	expectRefusal    = h.ExpectRefusal
	within           = h.Within
	stoppedThreads   = h.StoppedThreads
	markedMappings   = h.MarkedMappings
	unexplainedSites = h.UnexplainedSites
	decodeDoc        = h.DecodeDoc
	mustQuit         = h.MustQuit
)

const (
	exitOK          = h.ExitOK
	exitUsage       = h.ExitUsage
	exitTraced      = h.ExitTraced
	exitNotGlibc    = h.ExitNotGlibc
	exitNoSafe      = h.ExitNoSafe
	exitNoPerf      = h.ExitNoPerf
	exitInterrupted = h.ExitInterrupted
	exitBrokenPipe  = h.ExitBrokenPipe
	exitNoProcess   = h.ExitNoProcess
	exitBadCore     = h.ExitBadCore
)
