// Command rusage runs a command and says what it cost: wall time, CPU time
// (user and system, of all its threads and the children it waited for) and
// its peak resident set, from wait4's rusage. It is bench/scale's stand-in
// for /usr/bin/time -v, which a bare machine may not have: built static
// with the rest, it needs nothing installed.
//
//	rusage OUT COMMAND [ARGS...]
//
// The command's stdin, stdout and stderr are rusage's. OUT receives one
// line, "WALL_US CPU_US MAXRSS_KIB EXIT"; rusage exits with the command's
// status (1 when it could not be started).
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: rusage OUT COMMAND [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(1)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var cpu time.Duration
	var maxrss int64
	if ru != nil {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		maxrss = ru.Maxrss // KiB on Linux
	}
	code := cmd.ProcessState.ExitCode()
	line := fmt.Sprintf("%d %d %d %d\n", wall.Microseconds(), cpu.Microseconds(), maxrss, code)
	if err := os.WriteFile(os.Args[1], []byte(line), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(1)
	}
	os.Exit(code)
}
