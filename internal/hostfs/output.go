package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CheckOutput tells whether path may receive an output file: it must not
// exist, or be a regular file, which is then replaced. Anything else is
// refused rather than written into: a device or a FIFO would take the
// bytes somewhere else (or block), and renaming over it would replace the
// node itself (-o /dev/null as root would break the system). A symbolic
// link is refused too: renaming over it replaces the link, not the file
// it names, which is never what was meant.
func CheckOutput(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return &NotRegularError{Path: path, Kind: kindOf(fi.Mode())}
	}
	return nil
}

// Output is an output file being written under a hidden name next to its
// path (.NAME.partial-RANDOM, in the same directory so that the final
// rename is atomic), locked with flock for as long as it is open.
type Output struct {
	*os.File
	path string
	done bool
	// Removed lists the partial files of the same path that a killed
	// arenactl had left behind, found unlocked and removed on creation.
	Removed []string
}

// partialPrefix is the hidden name's start for path's partial files.
func partialPrefix(path string) string { return "." + filepath.Base(path) + ".partial-" }

// CreateOutput starts writing path (see CheckOutput for what may be
// there) and removes the stale partial files of the same path: those no
// live process holds locked, owned by this user.
func CreateOutput(path string) (*Output, error) {
	if err := CheckOutput(path); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	var f *os.File
	for tries := 0; ; tries++ {
		var err error
		if f, err = os.CreateTemp(dir, partialPrefix(path)); err != nil {
			return nil, err
		}
		// A cleaner that found the new file before the lock was taken
		// removes it only while holding the lock itself: once ours is
		// taken, a name still linked stays ours.
		lerr := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		var st unix.Stat_t
		if lerr == nil {
			lerr = unix.Fstat(int(f.Fd()), &st)
		}
		if lerr == nil && st.Nlink > 0 {
			break
		}
		f.Close()
		if tries == 3 {
			if lerr == nil {
				lerr = unix.ENOENT
			}
			return nil, &fs.PathError{Op: "lock", Path: f.Name(), Err: lerr}
		}
	}
	o := &Output{File: f, path: path}
	o.Removed = removeStale(path, f.Name())
	return o, nil
}

// removeStale removes path's partial files other than own that are stale:
// regular files of this user that no one holds locked (a live writer
// keeps its lock until the file is renamed or removed).
func removeStale(path, own string) []string {
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil
	}
	var removed []string
	prefix := partialPrefix(path)
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || name == filepath.Base(own) {
			continue
		}
		p := filepath.Join(filepath.Dir(path), name)
		if removeIfStale(p) {
			removed = append(removed, p)
		}
	}
	return removed
}

func removeIfStale(p string) bool {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st, now unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		return false
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // being written
	}
	// The name must still be the file locked, not one put there since.
	if unix.Lstat(p, &now) != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return false
	}
	return unix.Unlink(p) == nil
}

// Commit renames the file into place and closes it. What is at the path is
// checked again just before: a node that appeared meanwhile is never
// replaced unless it is a regular file (where the file system supports
// RENAME_NOREPLACE, an empty path is filled atomically).
func (o *Output) Commit() error {
	if o.done {
		return nil
	}
	for tries := 0; ; tries++ {
		fi, err := os.Lstat(o.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = unix.Renameat2(unix.AT_FDCWD, o.Name(), unix.AT_FDCWD, o.path, unix.RENAME_NOREPLACE)
			if err == unix.EEXIST && tries < 3 {
				continue
			}
			if err == unix.EINVAL || err == unix.ENOSYS {
				err = os.Rename(o.Name(), o.path)
			} else if err != nil {
				err = &os.LinkError{Op: "rename", Old: o.Name(), New: o.path, Err: err}
			}
		case err != nil:
			return err
		case !fi.Mode().IsRegular():
			return &NotRegularError{Path: o.path, Kind: kindOf(fi.Mode())}
		default:
			err = os.Rename(o.Name(), o.path)
		}
		if err != nil {
			return err
		}
		break
	}
	o.done = true
	// Closed only now: until the rename, the lock keeps cleaners off it.
	return o.Close()
}

// Discard removes the partial file unless it was committed.
func (o *Output) Discard() {
	if !o.done {
		os.Remove(o.Name())
		o.Close()
		o.done = true
	}
}
