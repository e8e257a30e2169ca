// Package buildinfo owns what an arenactl binary knows about its own build:
// the version stamped by the release script, and the module version, VCS
// commit and toolchain that the Go linker recorded. The CLI prints it
// (arenactl version); anything that publishes metrics can export it as an
// _info metric.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by scripts/release.sh with
// -ldflags "-X github.com/arenactl/arenactl/internal/buildinfo.version=v1.2.3"
// (and commit, commitTime, dirty). The commit is stamped too because the Go toolchain
// records none when building in a linked git worktree (golang/go#58218) or
// from a source tree without .git, and may record the enclosing checkout's
// in a nested one.
var (
	version    string
	commit     string
	commitTime string // RFC 3339
	dirty      string // "true" or "false"; empty when not stamped
)

// Info describes one build.
type Info struct {
	// Version is the version to show: the stamped release version, else
	// the module version Go recorded (what `go install …@vX` builds), else
	// "devel".
	Version string
	// VersionFrom says where Version came from: "release stamp", "module",
	// or "none".
	VersionFrom string
	// Module is the main module's path and ModuleVersion the version Go
	// recorded for it: "(devel)" for a build inside a checkout, a
	// pseudo-version when Go stamped VCS information.
	Module        string
	ModuleVersion string
	// Commit is the VCS revision, empty when unknown; CommitTime is its
	// RFC 3339 time when Go recorded one; Dirty is true when the tree had
	// uncommitted changes.
	Commit     string
	CommitTime string
	Dirty      bool
	// GoVersion is the toolchain that built the binary, GOOS/GOARCH its
	// target, CGO whether cgo was enabled (a cgo build links libc
	// dynamically; a release build never does).
	GoVersion string
	GOOS      string
	GOARCH    string
	CGO       string
}

// Read returns the running binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, stamp{version, commit, commitTime, dirty})
}

// stamp is what the release script set with -X.
type stamp struct{ version, commit, commitTime, dirty string }

// fromBuildInfo merges the recorded build information with the stamped
// values; bi may be nil (a binary built without module support).
func fromBuildInfo(bi *debug.BuildInfo, st stamp) Info {
	in := Info{GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	if bi != nil {
		in.GoVersion = bi.GoVersion
		in.Module = bi.Main.Path
		in.ModuleVersion = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.time":
				in.CommitTime = s.Value
			case "vcs.modified":
				in.Dirty = s.Value == "true"
			case "CGO_ENABLED":
				in.CGO = s.Value
			case "GOOS":
				in.GOOS = s.Value
			case "GOARCH":
				in.GOARCH = s.Value
			}
		}
	}
	// The release script asked git itself; prefer that over what the
	// toolchain found by walking up from the source directory.
	if st.commit != "" {
		in.Commit, in.CommitTime, in.Dirty = st.commit, st.commitTime, st.dirty == "true"
	}
	switch {
	case st.version != "":
		in.Version, in.VersionFrom = st.version, "release stamp"
	case in.ModuleVersion != "" && in.ModuleVersion != "(devel)":
		in.Version, in.VersionFrom = in.ModuleVersion, "module"
	default:
		in.Version, in.VersionFrom = "devel", "none"
	}
	return in
}

// String is the report `arenactl version` prints: the version on the first
// line, then one line per fact, unknown ones said to be unknown.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "arenactl %s\n", in.Version)
	mod := in.Module
	if mod == "" {
		mod = "unknown"
	}
	if in.ModuleVersion != "" {
		mod += " " + in.ModuleVersion
	}
	fmt.Fprintf(&b, "module:  %s\n", mod)
	c := "unknown"
	if in.Commit != "" {
		c = in.Commit
		if in.Dirty {
			c += "+dirty"
		}
		if in.CommitTime != "" {
			c += " (" + in.CommitTime + ")"
		}
	}
	fmt.Fprintf(&b, "commit:  %s\n", c)
	// A CGO_ENABLED=0 build on Linux is linked internally, hence static;
	// with cgo, whether libc is linked depends on the packages (net), so
	// that is left unsaid.
	cgo := ""
	switch in.CGO {
	case "0":
		cgo = ", CGO_ENABLED=0 (static)"
	case "1":
		cgo = ", CGO_ENABLED=1"
	}
	fmt.Fprintf(&b, "go:      %s %s/%s%s\n", in.GoVersion, in.GOOS, in.GOARCH, cgo)
	return b.String()
}
