package layouts

import "fmt"

// Version is a glibc release, as "release version 2.36" in libc's banner.
type Version struct{ Major, Minor int }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// IsZero reports whether the version is unknown.
func (v Version) IsZero() bool { return v == Version{} }

// Less reports whether v is older than major.minor.
func (v Version) Less(major, minor int) bool {
	return v.Major < major || (v.Major == major && v.Minor < minor)
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool { return !v.Less(major, minor) }
