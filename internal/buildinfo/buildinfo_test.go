package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func settings(kv ...string) []debug.BuildSetting {
	var s []debug.BuildSetting
	for i := 0; i+1 < len(kv); i += 2 {
		s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
	}
	return s
}

func TestFromBuildInfo(t *testing.T) {
	const rev = "4f98ad8c0ffee4f98ad8c0ffee4f98ad8c0ffee0"
	checkout := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/arenactl/arenactl", Version: "(devel)"},
		Settings: settings("CGO_ENABLED", "1", "GOOS", "linux", "GOARCH", "amd64",
			"vcs.revision", rev, "vcs.time", "2026-11-23T18:48:00Z", "vcs.modified", "true"),
	}
	installed := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/arenactl/arenactl", Version: "v1.4.0"},
		Settings:  settings("CGO_ENABLED", "0", "GOOS", "linux", "GOARCH", "amd64"),
	}
	for _, tc := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		st                    stamp
		version, from, commit string
		dirty                 bool
		lines                 []string
	}{
		{name: "checkout, no stamp", bi: checkout, version: "devel", from: "none", commit: rev, dirty: true,
			lines: []string{"arenactl devel\n", "module:  github.com/arenactl/arenactl (devel)\n",
				"commit:  " + rev + "+dirty (2026-11-23T18:48:00Z)\n", "go:      go1.26.8 linux/amd64, CGO_ENABLED=1\n"}},
		{name: "go install @v1.4.0", bi: installed, version: "v1.4.0", from: "module",
			lines: []string{"arenactl v1.4.0\n", "commit:  unknown\n", "CGO_ENABLED=0 (static)"}},
		{name: "release stamp wins", bi: installed, st: stamp{version: "v1.5.0-rc1", commit: "abc123", dirty: "false"},
			version: "v1.5.0-rc1", from: "release stamp", commit: "abc123",
			lines: []string{"arenactl v1.5.0-rc1\n", "module:  github.com/arenactl/arenactl v1.4.0\n", "commit:  abc123\n"}},
		// A nested worktree may get the enclosing checkout's revision from
		// the toolchain; the stamp, from git in the tree itself, wins, and
		// its time replaces the other commit's.
		{name: "stamped commit over recorded", bi: checkout, st: stamp{version: "v2.0.0", commit: "abc123", commitTime: "2026-11-20T10:00:00Z", dirty: "true"},
			version: "v2.0.0", from: "release stamp", commit: "abc123", dirty: true,
			lines: []string{"commit:  abc123+dirty (2026-11-20T10:00:00Z)\n"}},
		{name: "no build info", bi: nil, version: "devel", from: "none",
			lines: []string{"module:  unknown\n", "commit:  unknown\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fromBuildInfo(tc.bi, tc.st)
			if in.Version != tc.version || in.VersionFrom != tc.from || in.Commit != tc.commit || in.Dirty != tc.dirty {
				t.Errorf("got version %q from %q, commit %q dirty %v; want %q from %q, commit %q dirty %v",
					in.Version, in.VersionFrom, in.Commit, in.Dirty, tc.version, tc.from, tc.commit, tc.dirty)
			}
			s := in.String()
			for _, l := range tc.lines {
				if !strings.Contains(s, l) {
					t.Errorf("report lacks %q:\n%s", l, s)
				}
			}
		})
	}
}

// The test binary itself has build information: Read must find the module.
func TestReadRunningBinary(t *testing.T) {
	in := Read()
	if in.Module != "github.com/arenactl/arenactl" || in.GoVersion == "" {
		t.Errorf("Read() = %+v", in)
	}
}
