package perf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
)

// Tracepoint is one kernel tracepoint: its id (the perf event's config)
// and the offsets of its fields in a sample's raw data.
type Tracepoint struct {
	Group, Name string
	ID          uint64
	Fields      map[string]Field
}

// Field is where a tracepoint field lies in the raw data.
type Field struct{ Offset, Size int }

// Uint reads field name from raw data, 0 when it is not there.
func (tp *Tracepoint) Uint(raw []byte, name string) uint64 {
	f, ok := tp.Fields[name]
	if !ok || f.Offset+f.Size > len(raw) {
		return 0
	}
	var v uint64
	for i := f.Size - 1; i >= 0; i-- {
		v = v<<8 | uint64(raw[f.Offset+i])
	}
	return v
}

// Int reads a signed field (a syscall's return value).
func (tp *Tracepoint) Int(raw []byte, name string) int64 {
	v := tp.Uint(raw, name)
	if f := tp.Fields[name]; f.Size > 0 && f.Size < 8 {
		shift := 64 - 8*f.Size
		return int64(v<<shift) >> shift
	}
	return int64(v)
}

// tracefsDirs are where tracefs is found when mounted: its own mount
// point, and under debugfs.
var tracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// Tracepoints reads the ids and formats of the named tracepoints
// ("group/name") from tracefs. When tracefs is mounted nowhere, it is
// mounted in a mount namespace of one thread of arenactl's own, read, and
// gone with that thread: nothing changes on the host.
func Tracepoints(names ...string) ([]Tracepoint, error) {
	for _, d := range tracefsDirs {
		if _, err := os.Stat(filepath.Join(d, "events")); err == nil {
			return readTracepoints(d, names)
		}
	}
	return privateTracefs(names)
}

func readTracepoints(dir string, names []string) ([]Tracepoint, error) {
	var out []Tracepoint
	for _, n := range names {
		group, name, ok := strings.Cut(n, "/")
		if !ok {
			return nil, &Error{Op: "tracepoint " + n, Err: errors.New("not group/name")}
		}
		b, err := os.ReadFile(filepath.Join(dir, "events", group, name, "format"))
		if err != nil {
			return nil, wrap("reading tracepoint "+n+" from tracefs", err)
		}
		tp, err := parseFormat(string(b))
		if err != nil {
			return nil, &Error{Kind: errkind.ErrNoPerf, Op: "tracepoint " + n, Err: err}
		}
		tp.Group = group
		out = append(out, tp)
	}
	return out, nil
}

// parseFormat reads a tracepoint's format file: its name, ID and fields.
func parseFormat(text string) (Tracepoint, error) {
	tp := Tracepoint{Fields: map[string]Field{}}
	haveID := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "name:"):
			tp.Name = strings.TrimSpace(strings.TrimPrefix(line, "name:"))
		case strings.HasPrefix(line, "ID:"):
			id, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "ID:")), 10, 64)
			if err != nil {
				return tp, fmt.Errorf("bad ID line %q", line)
			}
			tp.ID, haveID = id, true
		case strings.HasPrefix(line, "field:"):
			var decl string
			var f Field
			for _, part := range strings.Split(line, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(part), ":")
				switch k {
				case "field":
					decl = v
				case "offset":
					f.Offset, _ = strconv.Atoi(v)
				case "size":
					f.Size, _ = strconv.Atoi(v)
				}
			}
			words := strings.Fields(decl)
			if len(words) == 0 || f.Size <= 0 || f.Size > 8 {
				continue // arrays and strings: not needed here
			}
			tp.Fields[words[len(words)-1]] = f
		}
	}
	if !haveID {
		return tp, errors.New("format has no ID")
	}
	return tp, nil
}

// privateTracefs mounts tracefs where only one locked OS thread of
// arenactl sees it: unshare(CLONE_NEWNS) on that thread, every mount made
// private so nothing propagates to the host, tracefs mounted on an empty
// directory, read, and the thread left locked so that the Go runtime ends
// it (and its namespace, and the mount) when the goroutine returns.
func privateTracefs(names []string) ([]Tracepoint, error) {
	type result struct {
		tps []Tracepoint
		err error
	}
	ch := make(chan result, 1)
	dir, err := os.MkdirTemp("", "arenactl-tracefs-")
	if err != nil {
		return nil, &Error{Kind: errkind.ErrNoPerf, Op: "mounting tracefs", Err: err}
	}
	defer os.Remove(dir)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		r := result{}
		defer func() { ch <- r }()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			r.err = err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			r.err = err
			return
		}
		if err := unix.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
			r.err = err
			return
		}
		r.tps, r.err = readTracepoints(dir, names)
		unix.Unmount(dir, unix.MNT_DETACH)
	}()
	r := <-ch
	if r.err != nil {
		var pe *Error
		if errors.As(r.err, &pe) {
			return nil, r.err
		}
		if errors.Is(r.err, unix.EPERM) {
			return nil, &Error{Kind: errkind.ErrNoTracefs, Op: "tracefs is not mounted and arenactl may not mount it", Err: r.err}
		}
		return nil, &Error{Kind: errkind.ErrNoTracefs, Op: "tracefs is not mounted and mounting it failed", Err: r.err}
	}
	return r.tps, nil
}
