package debuginfod

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkCache makes the cache directory if it is missing (0700) and accepts
// it only when no other user can put a file or a link where arenactl will
// read or write: the directory is arenactl's user's and writable by it
// alone, and every directory above it belongs to root or that user and is
// writable by no one else, unless sticky (/tmp: others cannot rename or
// remove what is not theirs). Otherwise a user could have root write a
// file through a link of theirs, or read a debug file of theirs as a
// server's (names and lines that lie).
func (c *Client) checkCache() error {
	abs, err := filepath.Abs(c.Cache)
	if err != nil {
		return &Error{What: "cache " + c.Cache, Err: err}
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return &Error{What: "cache " + abs, Err: err}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return &Error{What: "cache " + abs, Err: err}
	}
	if err := ownDir(real); err != nil {
		return &Error{What: "cache", Err: err}
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return &Error{What: "cache", Err: err}
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
			return &Error{What: fmt.Sprintf("cache %s: %s belongs to uid %d, who could replace it", real, d, st.Uid)}
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return &Error{What: fmt.Sprintf("cache %s: other users may write %s", real, d)}
		}
		if d == "/" {
			return nil
		}
	}
}

// ownDir accepts a directory (no link) of arenactl's user that no one else
// may write.
func ownDir(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return err
	}
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", d)
	case !owned(fi):
		return fmt.Errorf("%s is not arenactl's user's", d)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("other users may write %s", d)
	}
	return nil
}

func owned(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
