package inject

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/libc"
)

const (
	ioNBF    = 2
	pageSize = 4096

	// The XML is about 10 KiB per arena; the first buffer fits hundreds of
	// arenas and costs nothing until touched. A truncated report is retried
	// with a larger buffer.
	firstBufSize = 4 << 20
	maxBufSize   = 256 << 20
)

// InjectError: the injected sequence could not finish. Leaked lists what was
// left in the target because the thread could no longer be used to undo it.
type InjectError struct {
	Step   string
	Err    error
	Leaked string
}

func (e *InjectError) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Step, e.Err)
	if e.Leaked != "" {
		msg += "; left in the target: " + e.Leaked
	}
	return msg
}

func (e *InjectError) Unwrap() error { return e.Err }

// Is: whatever its cause, the call failed (errkind.ErrCallFailed); the
// cause's own kind (the target gone, say) is found through Unwrap.
func (e *InjectError) Is(target error) bool { return target == errkind.ErrCallFailed }

// injection holds the addresses of one run and undoes what it created.
type injection struct {
	c       Caller
	fn      map[string]uint64
	errno   uint64 // address of the hijacked thread's errno
	saved   [4]byte
	journal uint64 // where we record what we create (0: nowhere)
}

func newInjection(c Caller, l *libc.Libc, need ...string) (*injection, error) {
	in := &injection{c: c, fn: map[string]uint64{}}
	for _, name := range append([]string{"__errno_location"}, need...) {
		s, ok := l.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%s does not export %s", l.Path, name)
		}
		in.fn[name] = s.Value
	}
	// The calls below may set errno; the target must find it as it left it.
	loc, err := c.Call(in.fn["__errno_location"])
	if err != nil {
		return nil, &InjectError{Step: "calling __errno_location", Err: err}
	}
	in.errno = loc
	if _, err := c.ReadAt(in.saved[:], loc); err != nil {
		return nil, &InjectError{Step: "reading errno", Err: err}
	}
	if j, ok := c.(Journaler); ok {
		in.journal, _ = j.Journal()
	}
	in.removeLeftovers(l)
	return in, nil
}

func (in *injection) restoreErrno() error {
	_, err := in.c.WriteAt(in.saved[:], in.errno)
	return err
}

func (in *injection) call(name string, args ...uint64) (uint64, error) {
	r, err := in.c.Call(in.fn[name], args...)
	if err != nil {
		return 0, &InjectError{Step: "calling " + name, Err: err}
	}
	return r, nil
}

// errResult reports whether a raw syscall-wrapper return is -1 (mmap's
// MAP_FAILED, munmap's failure).
func errResult(r uint64) bool { return r == ^uint64(0) }

// RunMallocInfo runs glibc's own malloc_info(0, fp) in the target, with fp a
// fmemopen stream over memory we map in the target: nothing reaches the
// target's stdout, and the stream is unbuffered so stdio does not allocate
// while malloc_info walks the arenas (fmemopen allocates its FILE before the
// walk, from the hijacked thread's tcache when it has room). Everything we
// created is removed before returning, and errno is restored. ctx is checked
// between calls: when it is done, the remaining work is skipped but the
// clean-up still runs.
func RunMallocInfo(ctx context.Context, c Caller, l *libc.Libc) ([]byte, error) {
	in, err := newInjection(c, l, "mmap", "munmap", "fmemopen", "setvbuf", "fclose", "malloc_info")
	if err != nil {
		return nil, err
	}
	for size := uint64(firstBufSize); ; size *= 4 {
		xml, truncated, err := in.mallocInfoOnce(ctx, size)
		if rerr := in.restoreErrno(); err == nil && rerr != nil {
			err = &InjectError{Step: "restoring errno", Err: rerr}
		}
		if err != nil || !truncated {
			return xml, err
		}
		if size*4 > maxBufSize {
			return nil, fmt.Errorf("malloc_info printed more than %d MiB", maxBufSize>>20)
		}
	}
}

func (in *injection) mallocInfoOnce(ctx context.Context, size uint64) (xml []byte, truncated bool, err error) {
	in.record(1, jMmap, 0, size, 0)
	buf, err := in.call("mmap", 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0)
	if err != nil {
		return nil, false, err
	}
	if errResult(buf) {
		in.record(0, jNone, 0, 0, 0)
		return nil, false, &InjectError{Step: "mmap in the target", Err: errors.New("it returned MAP_FAILED")}
	}
	leak := fmt.Sprintf("a %d-byte mapping at %#x", size, buf)
	if in.journal != 0 {
		leak += " (recorded in our call site, which stays, marked: the next arenactl run removes both)"
	}
	unmap := func() error {
		in.record(1, jMunmap, buf, size, 0)
		if _, err := in.call("munmap", buf, size); err != nil {
			return &InjectError{Step: "unmapping our buffer", Err: err, Leaked: leak}
		}
		in.record(0, jNone, 0, 0, 0)
		return nil
	}
	// Page 0 holds the mode string and our mark; the stream writes into the
	// rest.
	page0 := make([]byte, bufMarkOff+len(bufMark))
	copy(page0, "w\x00")
	copy(page0[bufMarkOff:], bufMark)
	if _, err := in.c.WriteAt(page0, buf); err != nil {
		return nil, false, errors.Join(&InjectError{Step: "writing the fmemopen mode", Err: err}, unmap())
	}
	in.record(1, jMapped, buf, size, 0)
	data, dataLen := buf+pageSize, size-pageSize
	if err := ctx.Err(); err != nil {
		return nil, false, errors.Join(err, unmap())
	}
	in.record(1, jFmemopen, buf, size, 0)
	fp, err := in.call("fmemopen", data, dataLen, buf)
	if err != nil {
		return nil, false, withLeak(err, leak)
	}
	if fp == 0 {
		in.record(1, jMapped, buf, size, 0)
		return nil, false, errors.Join(&InjectError{Step: "fmemopen in the target", Err: errors.New("it returned NULL")}, unmap())
	}
	in.record(1, jOpen, buf, size, fp)
	closeStream := func() error {
		in.record(1, jFclose, buf, size, fp)
		if _, err := in.call("fclose", fp); err != nil {
			return withLeak(err, fmt.Sprintf("a FILE at %#x and ", fp)+leak)
		}
		in.record(1, jMapped, buf, size, 0)
		return nil
	}
	_, err = in.call("setvbuf", fp, 0, ioNBF, 0)
	if err == nil {
		err = ctx.Err()
	}
	var rc uint64
	if err == nil {
		rc, err = in.call("malloc_info", 0, fp)
	}
	if cerr := closeStream(); cerr != nil {
		return nil, false, errors.Join(err, cerr)
	}
	if err == nil && int32(rc) != 0 {
		err = &InjectError{Step: "malloc_info", Err: fmt.Errorf("it returned %d", int32(rc))}
	}
	if err == nil {
		xml, truncated, err = readCString(in.c, data, dataLen)
	}
	if uerr := unmap(); uerr != nil {
		return nil, false, errors.Join(err, uerr)
	}
	return xml, truncated, err
}

// withLeak adds what is left in the target when a call failed in a way that
// leaves the thread unusable (timeout, fault).
func withLeak(err error, leak string) error {
	var ie *InjectError
	if errors.As(err, &ie) && ie.Leaked == "" {
		ie.Leaked = leak
	}
	return err
}

// readCString reads the NUL-terminated text fmemopen left at addr. Text
// filling the whole buffer was cut short.
func readCString(m glibc.Memory, addr, max uint64) ([]byte, bool, error) {
	var out []byte
	chunk := make([]byte, 64<<10)
	for off := uint64(0); off < max; off += uint64(len(chunk)) {
		n := uint64(len(chunk))
		if off+n > max {
			n = max - off
		}
		if _, err := m.ReadAt(chunk[:n], addr+off); err != nil {
			return nil, false, &InjectError{Step: "reading the report", Err: err}
		}
		if i := bytes.IndexByte(chunk[:n], 0); i >= 0 {
			return append(out, chunk[:i]...), false, nil
		}
		out = append(out, chunk[:n]...)
	}
	return out, true, nil
}

// RunMallocTrim runs malloc_trim(pad) in the target and returns its result:
// 1 when memory was released to the system, 0 otherwise.
func RunMallocTrim(ctx context.Context, c Caller, l *libc.Libc, pad uint64) (int, error) {
	in, err := newInjection(c, l, "malloc_trim")
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, errors.Join(err, in.restoreErrno())
	}
	rc, err := in.call("malloc_trim", pad)
	if rerr := in.restoreErrno(); err == nil && rerr != nil {
		err = &InjectError{Step: "restoring errno", Err: rerr}
	}
	return int(int32(rc)), err
}
