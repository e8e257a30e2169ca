package core

import (
	"errors"
	"os"
	"sort"
	"sync"
)

// WithFiles is a view of the core's memory that reads the pages the kernel
// left out of the core (file-backed pages never written, such as most of a
// library's data) from the mapped files themselves. open finds a file by
// the path the core recorded (for another machine's core: under a sysroot).
type WithFiles struct {
	c     *Core
	open  func(path string) (*os.File, error)
	mu    sync.Mutex          // guards files: the walk's workers and a parallel scan read at once
	files map[string]*os.File // nil entry: could not be opened
}

// Files returns the view; Close closes the files it opened.
func (c *Core) WithFiles(open func(path string) (*os.File, error)) *WithFiles {
	return &WithFiles{c: c, open: open, files: map[string]*os.File{}}
}

// ReadAt reads from the core, and from the backing file where the core has
// nothing.
func (w *WithFiles) ReadAt(p []byte, addr uint64) (int, error) {
	n, err := w.c.ReadAt(p, addr)
	for err != nil && errors.Is(err, ErrNotInCore) {
		a := addr + uint64(n)
		fm, ok := w.fileAt(a)
		if !ok {
			return n, err
		}
		f := w.file(fm.Path)
		if f == nil {
			return n, err
		}
		// Up to the end of this file mapping, then back to the core.
		m := min(uint64(len(p)-n), fm.End-a)
		got, rerr := f.ReadAt(p[n:n+int(m)], int64(fm.Offset+(a-fm.Start)))
		n += got
		if rerr != nil || uint64(got) < m {
			return n, err
		}
		if n == len(p) {
			return n, nil
		}
		var more int
		more, err = w.c.ReadAt(p[n:], addr+uint64(n))
		n += more
	}
	return n, err
}

func (w *WithFiles) fileAt(a uint64) (FileMapping, bool) {
	fs := w.c.Files
	i := sort.Search(len(fs), func(i int) bool { return fs[i].End > a })
	if i < len(fs) && fs[i].Start <= a {
		return fs[i], true
	}
	// NT_FILE is in address order, but be safe if not.
	for _, f := range fs {
		if f.Start <= a && a < f.End {
			return f, true
		}
	}
	return FileMapping{}, false
}

func (w *WithFiles) file(path string) *os.File {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.files[path]; ok {
		return f
	}
	f, err := w.open(path)
	if err != nil {
		f = nil
	}
	w.files[path] = f
	return f
}

// ReadsShared says that ReadAt may be called from several goroutines at
// once: the core is read from its mapping (or bytes) in place, and a file
// with pread, and the files opened are kept under a lock. A walk may then
// spread the arenas over workers.
func (w *WithFiles) ReadsShared() {}

// Close closes every file the view opened.
func (w *WithFiles) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.files {
		if f != nil {
			f.Close()
		}
	}
}
