// Package hostfs owns what arenactl does to the host's files that are not a
// target's memory: it opens input files (cores, the libraries a core names)
// only when they are regular files, so that a FIFO cannot block the open
// and a device cannot feed endless bytes; and it writes output files
// (snapshot -o) under a hidden name next to their path, renamed into place
// only over nothing or over a regular file, never over a device, a FIFO, a
// socket, a directory or a symbolic link. Partial files that a killed
// arenactl left behind are found by a lock no live writer would have let
// go, and removed.
package hostfs

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// NotRegularError is a path that names something other than a regular file
// where arenactl reads or writes only regular files.
type NotRegularError struct {
	Path string
	Kind string // "directory", "character device", "FIFO", ...
}

func (e *NotRegularError) Error() string {
	if e.Kind == "directory" {
		return e.Path + ": is a directory"
	}
	return e.Path + ": not a regular file (a " + e.Kind + ")"
}

// kindOf names a file type for messages.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// OpenRegular opens path for reading if it is a regular file (a symbolic
// link to one is fine). The open itself never blocks: O_NONBLOCK keeps a
// FIFO from waiting for a writer, and the type is taken from the opened
// file, not from an earlier stat that a rename could make stale.
func OpenRegular(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	}
	if err == unix.ENXIO {
		// A socket cannot be opened at all: name it, not the errno.
		var st unix.Stat_t
		if unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, &NotRegularError{Path: path, Kind: kindOf(modeOf(st.Mode))}
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &NotRegularError{Path: path, Kind: kindOf(modeOf(st.Mode))}
	}
	// Reads of a regular file never block anyway; clear the flag so that
	// nothing downstream sees EAGAIN semantics it does not expect.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// modeOf turns st_mode's type bits into an fs.FileMode's.
func modeOf(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	}
	return fs.ModeIrregular
}

// IsNotRegular tells whether err is a NotRegularError.
func IsNotRegular(err error) bool {
	var nr *NotRegularError
	return errors.As(err, &nr)
}
