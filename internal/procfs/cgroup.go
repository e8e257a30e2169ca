package procfs

import (
	"os"
	"strings"
)

// Cgroup is the process's control group as systemd sees it, from
// /proc/PID/cgroup: the path in the "name=systemd" hierarchy when there is
// one (cgroup v1 and hybrid systems, where systemd tracks units there),
// else the unified (v2) hierarchy's "0::" path; "" when the file names
// neither (a v1 system without systemd).
func Cgroup(pid int) (string, error) {
	b, err := os.ReadFile(Path(pid, "cgroup"))
	if err != nil {
		return "", Error(pid, err)
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
