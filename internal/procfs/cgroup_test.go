package procfs

import (
	"os"
	"slices"
	"testing"
)

func TestParseCgroup(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0::/system.slice/mariadb.service\n", "/system.slice/mariadb.service"},
		// Hybrid: systemd tracks units in its named v1 hierarchy.
		{"9:name=systemd:/system.slice/x.service\n4:memory:/other\n0::/\n", "/system.slice/x.service"},
		{"0::/\n9:name=systemd:/user.slice/a:b.scope\n", "/user.slice/a:b.scope"},
		{"4:memory:/docker/abc\n1:cpu:/docker/abc\n", ""},
		{"", ""},
	} {
		if got := parseCgroup(c.in); got != c.want {
			t.Errorf("parseCgroup(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSystemdUnit(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/system.slice/mariadb.service", "mariadb.service"},
		{"/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service"},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", "user@1000.service"},
		{"/user.slice/user-1000.slice/session-3.scope", "session-3.scope"},
		{"/init.scope", "init.scope"},
		{"/system.slice", ""},
		{"/", ""},
		{"", ""},
		{"/docker/0123abcd", ""},
		{"/.service", ""},
	} {
		if got := SystemdUnit(c.in); got != c.want {
			t.Errorf("SystemdUnit(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCgroupAndPidsSelf(t *testing.T) {
	if _, err := Cgroup(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	pids, err := Pids()
	if err != nil || !slices.Contains(pids, os.Getpid()) {
		t.Fatalf("our own pid %d not among %d pids: %v", os.Getpid(), len(pids), err)
	}
}
