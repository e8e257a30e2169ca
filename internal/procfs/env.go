package procfs

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Environ is the environment the process started with (what glibc read
// when it set up malloc), as name → value.
func Environ(pid int) (map[string]string, error) { return ByPid(pid).Environ() }

// Environ is the environment of the process p holds (see Environ).
func (p *Proc) Environ() (map[string]string, error) {
	b, err := os.ReadFile(p.Path("environ"))
	if err != nil {
		return nil, Error(p.Pid, err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

// AllowedCPUs is how many CPUs the process may run on (Cpus_allowed_list of
// /proc/PID/status); 0 when unknown.
func AllowedCPUs(pid int) int { return ByPid(pid).AllowedCPUs() }

// AllowedCPUs is how many CPUs the process p holds may run on.
func (p *Proc) AllowedCPUs() int {
	b, err := os.ReadFile(p.Path("status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return countCPUs(strings.TrimSpace(v))
		}
	}
	return 0
}

// OnlineCPUs is how many CPUs the system has online (glibc's
// get_nprocs, by which it sizes the arena limit); 0 when unknown.
func OnlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	return countCPUs(strings.TrimSpace(string(b)))
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
