package procfs

import (
	"errors"
	"os"
	"path"
	"strconv"
	"strings"
)

// Cgroup is the process's control group as systemd sees it, from
// /proc/PID/cgroup: the path in the "name=systemd" hierarchy when there is
// one (cgroup v1 and hybrid systems, where systemd tracks units there),
// else the unified (v2) hierarchy's "0::" path; "" when the file names
// neither (a v1 system without systemd).
func Cgroup(pid int) (string, error) { return ByPid(pid).Cgroup() }

// Cgroup is the control group of the process p holds (see Cgroup).
func (p *Proc) Cgroup() (string, error) {
	b, err := os.ReadFile(p.Path("cgroup"))
	if err != nil {
		return "", Error(p.Pid, err)
	}
	return parseCgroup(string(b)), nil
}

func parseCgroup(s string) string {
	var unified string
	found := false
	for _, l := range strings.Split(s, "\n") {
		// hierarchy-ID:controller-list:path; the path may itself hold ':'.
		id, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case ctrls == "name=systemd":
			return path
		case id == "0" && ctrls == "":
			unified, found = path, true
		}
	}
	if !found {
		return ""
	}
	return unified
}

// unitSuffixes are the kinds of systemd unit that own processes.
var unitSuffixes = []string{".service", ".scope", ".socket", ".mount", ".swap"}

// SystemdUnit is the systemd unit a cgroup path belongs to, the way
// systemd's own cg_path_get_unit reads it: the first path component, past
// the slices, that names a unit ("mariadb.service" in
// /system.slice/mariadb.service; "user@1000.service" for a user's
// services). "" when the path is in no unit (the root, a slice, a cgroup
// systemd does not manage).
func SystemdUnit(cgroup string) string {
	for _, c := range strings.Split(cgroup, "/") {
		if c == "" || strings.HasSuffix(c, ".slice") {
			continue
		}
		for _, s := range unitSuffixes {
			if strings.HasSuffix(c, s) && len(c) > len(s) {
				return c
			}
		}
		return ""
	}
	return ""
}

// MemoryRoom is how much more memory the process may be charged before a
// limit stops it: the least room under any memory limit of its cgroup and
// the cgroups above it (cgroup v2 memory.max, or v1 memory.limit_in_bytes),
// and what the machine has available (MemAvailable). Limit names the
// cgroup whose room is least, "" when the machine's is.
type MemoryRoom struct {
	Bytes uint64
	Limit string
}

// Where the cgroup hierarchies are mounted: v2 alone at the root, or beside
// the v1 controllers (a hybrid system), and v1's memory controller.
var (
	cgroup2Roots   = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
	cgroupV1Memory = "/sys/fs/cgroup/memory"
)

// ReadMemoryRoom reads the room for pid's memory. A cgroup whose files
// cannot be read limits nothing here.
func ReadMemoryRoom(pid int) (MemoryRoom, error) { return ByPid(pid).ReadMemoryRoom() }

// ReadMemoryRoom reads the room for the memory of the process p holds.
func (p *Proc) ReadMemoryRoom() (MemoryRoom, error) {
	avail, err := memAvailable()
	if err != nil {
		return MemoryRoom{}, err
	}
	room := MemoryRoom{Bytes: avail}
	b, err := os.ReadFile(p.Path("cgroup"))
	if err != nil {
		return MemoryRoom{}, Error(p.Pid, err)
	}
	least := func(root, leaf, maxFile, curFile string) {
		for dir := leaf; ; dir = path.Dir(dir) {
			max, err1 := readCgroupValue(path.Join(root, dir, maxFile))
			cur, err2 := readCgroupValue(path.Join(root, dir, curFile))
			if err1 == nil && err2 == nil && max < noLimit {
				left := uint64(0)
				if max > cur {
					left = max - cur
				}
				if left < room.Bytes {
					room = MemoryRoom{Bytes: left, Limit: dir}
				}
			}
			if dir == "/" || dir == "." || dir == "" {
				return
			}
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		id, rest, _ := strings.Cut(l, ":")
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case id == "0" && ctrls == "":
			for _, root := range cgroup2Roots {
				if _, err := os.Stat(path.Join(root, "cgroup.controllers")); err == nil {
					least(root, p, "memory.max", "memory.current")
					break
				}
			}
		case hasController(ctrls, "memory"):
			least(cgroupV1Memory, p, "memory.limit_in_bytes", "memory.usage_in_bytes")
		}
	}
	return room, nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// noLimit: v2 writes "max"; v1 writes a page-rounded LONG_MAX.
const noLimit = uint64(1) << 62

func readCgroupValue(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return noLimit, nil
	}
	return strconv.ParseUint(v, 10, 64)
}

func memAvailable() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
			return kB(strings.TrimSpace(v)), nil
		}
	}
	return 0, errors.New("/proc/meminfo: no MemAvailable")
}

// CgroupMemory is the memory of a process's cgroup (v2): its bytes
// charged (memory.current) and how many times it went over memory.high
// and was throttled (memory.events' high).
type CgroupMemory struct {
	Dir          string // the cgroup's directory
	Current      uint64
	HighEvents   uint64
	High, OOMs   uint64 // memory.high ("max": no limit, noLimit) and memory.events' oom_kill
	HasHighEvent bool   // memory.events was read
}

// MemoryCgroupDir is the directory of pid's memory cgroup: v2's ("0::"
// in /proc/PID/cgroup under the unified hierarchy's mount) where the
// memory controller is there, else v1's memory hierarchy; "" when it has
// neither.
func MemoryCgroupDir(pid int) (string, error) { return ByPid(pid).MemoryCgroupDir() }

// MemoryCgroupDir is the memory cgroup directory of the process p holds.
func (p *Proc) MemoryCgroupDir() (string, error) {
	b, err := os.ReadFile(p.Path("cgroup"))
	if err != nil {
		return "", Error(p.Pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		id, rest, _ := strings.Cut(l, ":")
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case id == "0" && ctrls == "":
			for _, root := range cgroup2Roots {
				dir := path.Join(root, path.Clean("/"+p))
				if _, err := os.Stat(path.Join(dir, "memory.current")); err == nil {
					return dir, nil
				}
			}
		case hasController(ctrls, "memory"):
			dir := path.Join(cgroupV1Memory, path.Clean("/"+p))
			if _, err := os.Stat(path.Join(dir, "memory.usage_in_bytes")); err == nil {
				return dir, nil
			}
		}
	}
	return "", nil
}

// ReadCgroupMemory reads a memory cgroup directory's figures (v2's
// memory.current and memory.events, or v1's memory.usage_in_bytes: v1
// has no memory.high, and no events of it).
func ReadCgroupMemory(dir string) (CgroupMemory, error) {
	m := CgroupMemory{Dir: dir}
	var err error
	if m.Current, err = readCgroupValue(path.Join(dir, "memory.current")); err != nil {
		m.Current, err = readCgroupValue(path.Join(dir, "memory.usage_in_bytes"))
		return m, err
	}
	m.High, _ = readCgroupValue(path.Join(dir, "memory.high"))
	b, err := os.ReadFile(path.Join(dir, "memory.events"))
	if err != nil {
		return m, nil
	}
	m.HasHighEvent = true
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, " ")
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch k {
		case "high":
			m.HighEvents = n
		case "oom_kill":
			m.OOMs = n
		}
	}
	return m, nil
}
