package testutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const ownedHelper = "ARENACTL_TESTUTIL_OWNED_HELPER"

// stayC answers as echoC does, and stays when its stdin closes, as a
// target that waits on something else would.
const stayC = `
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char line[256];
	printf("ready %s\n", argc > 1 ? argv[1] : "");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		printf("got %s", line);
		fflush(stdout);
	}
	for (;;)
		pause();
}
`

// TestTargetsDieWithTheTests runs this test binary again as a test that
// starts two targets and then hangs past go test's -timeout; that test's
// process dies of the timeout's panic, which runs no Cleanup, and both
// targets must die with it (before, they ran on). One target is started by
// a goroutine locked to its thread that then returns, ending the thread:
// it still lives while the test does.
func TestTargetsDieWithTheTests(t *testing.T) {
	if os.Getenv(ownedHelper) != "" {
		hangingTest(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTargetsDieWithTheTests$", "-test.timeout=5s")
	cmd.Env = append(os.Environ(), ownedHelper+"=1", "TMPDIR="+t.TempDir()) // its builds, left by its death
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	alive := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		l := sc.Text()
		if p, ok := strings.CutPrefix(l, "target "); ok {
			n, _ := strconv.Atoi(p)
			pids = append(pids, n)
		}
		alive = alive || l == "both alive"
	}
	cmd.Wait()
	if len(pids) != 2 || !alive {
		t.Fatalf("the helper test said targets %v, both alive %v", pids, alive)
	}
	for _, pid := range pids {
		dead := func() bool {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			return err != nil || strings.Contains(string(b), ") Z ")
		}
		for i := 0; i < 500 && !dead(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if !dead() {
			t.Errorf("target %d outlived the test that started it", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// hangingTest starts two targets, one from a thread that exits, says their
// PIDs, and hangs until go test's -timeout kills its process.
func hangingTest(t *testing.T) {
	bin := BuildCSource(t, "stay", stayC)
	first := Start(t, bin, "first")
	second := make(chan *Target)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		second <- Start(t, bin, "second")
	}()
	tg := <-second
	fmt.Printf("target %d\ntarget %d\n", first.Pid, tg.Pid)
	time.Sleep(200 * time.Millisecond) // the locked goroutine's thread is gone by now
	if first.Send("x") == "got x" && tg.Send("y") == "got y" {
		fmt.Println("both alive")
	}
	os.Stdout.Sync()
	time.Sleep(time.Hour)
}
