package live

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MallocEnv is what the diagnosis needs to know about a process beyond its
// memory: its malloc settings from the environment and the CPU counts glibc
// sizes its arena limit by.
type MallocEnv struct {
	OnlineCPUs, AffinityCPUs int
	Vars                     map[string]string // MALLOC_* and GLIBC_TUNABLES
}

// ReadMallocEnv reads /proc/PID/environ (the environment the process started
// with, which is what glibc read) and its CPU affinity.
func ReadMallocEnv(pid int) (MallocEnv, error) {
	e := MallocEnv{Vars: map[string]string{}}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return e, err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if ok && (strings.HasPrefix(k, "MALLOC_") || k == "GLIBC_TUNABLES") {
			e.Vars[k] = v
		}
	}
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		e.OnlineCPUs = countCPUs(strings.TrimSpace(string(b)))
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				e.AffinityCPUs = countCPUs(strings.TrimSpace(v))
			}
		}
	}
	return e, nil
}

// countCPUs counts a kernel CPU list such as "0-3,8,10-11".
func countCPUs(list string) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		n += b - a + 1
	}
	return n
}
