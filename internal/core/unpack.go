package core

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
)

var (
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicGzip = []byte{0x1f, 0x8b}
	magicXz   = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
)

// DefaultMaxUnpacked bounds the size of a compressed core once unpacked,
// unless Options says otherwise: far above the cores arenactl is meant
// for, far below what a few hundred kilobytes of zeros can claim.
const DefaultMaxUnpacked = 32 << 30

// Options say how OpenContext treats a compressed core.
type Options struct {
	// MaxUnpacked: refuse a core that unpacks to more bytes than this
	// (0: DefaultMaxUnpacked). Checked against the size the core's own
	// headers give before anything past them is unpacked, and against
	// the bytes actually unpacked.
	MaxUnpacked int64
	// Progress, when not nil, is where a line saying how far unpacking
	// got is rewritten in place (with \r) about once a second, once it has
	// taken more than a second; the line is cleared at the end. Meant for
	// a terminal.
	Progress io.Writer
}

// TooLargeError is a compressed core that unpacks past the limit.
type TooLargeError struct {
	Path     string
	Limit    int64
	Size     int64 // what its headers say, or the bytes unpacked when it was stopped
	Declared bool  // Size is from the headers
}

func (e *TooLargeError) Error() string {
	if e.Declared {
		return fmt.Sprintf("%s: unpacks to %d bytes by its ELF headers, more than the limit of %d", e.Path, e.Size, e.Limit)
	}
	return fmt.Sprintf("%s: unpacks to more than the limit of %d bytes", e.Path, e.Limit)
}

func (e *TooLargeError) Is(target error) bool { return target == errkind.ErrCoreTooLarge }

// SpaceError is a compressed core that the temporary directory has no
// room for.
type SpaceError struct {
	Path, Dir string
	Free      int64 // bytes left in Dir when unpacking stopped
	Written   int64 // bytes of the core written there by then
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("%s: unpacking it into %s stopped after %d bytes written: %d bytes free there", e.Path, e.Dir, e.Written, e.Free)
}

func (e *SpaceError) Is(target error) bool { return target == errkind.ErrNoSpace }

// StoppedError is an unpack stopped by its context (a signal): nothing of
// it is left, the temporary file having never had a name.
type StoppedError struct {
	Path string
	Err  error // the context's
}

func (e *StoppedError) Error() string {
	return "interrupted while unpacking " + e.Path + "; nothing of it was left in the temporary directory"
}

func (e *StoppedError) Unwrap() error { return e.Err }

// headerLimit bounds how much of a compressed core is unpacked into memory
// to read its ELF and program headers (a kernel core puts them first:
// 56 bytes per mapping).
const headerLimit = 16 << 20

// trailerSlack is how far a stream may run past the end its headers
// describe (gcore puts section names after the section headers).
const trailerSlack = 1 << 20

// unpack returns f itself for a plain core, or an unlinked temporary file
// holding the decompressed core: a core is read at random offsets, and
// compressed streams cannot be.
func (c *Core) unpack(ctx context.Context, f *os.File, opt Options) (*os.File, error) {
	var head [6]byte
	n, _ := f.ReadAt(head[:], 0)
	var r io.Reader
	var kind string
	switch h := head[:n]; {
	case bytes.HasPrefix(h, magicZstd):
		d, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
		if err != nil {
			f.Close()
			return nil, c.bad("zstd: %v", err)
		}
		defer d.Close()
		r, kind = d, "zstd"
	case bytes.HasPrefix(h, magicGzip):
		g, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, c.bad("gzip: %v", err)
		}
		r, kind = g, "gzip"
	case bytes.HasPrefix(h, magicXz):
		x, err := xz.NewReader(f)
		if err != nil {
			f.Close()
			return nil, c.bad("xz: %v", err)
		}
		r, kind = x, "xz"
	default:
		return f, nil
	}
	defer f.Close()
	limit := opt.MaxUnpacked
	if limit <= 0 {
		limit = DefaultMaxUnpacked
	}
	u := &unpacker{c: c, ctx: ctx, r: r, kind: kind, limit: limit, progress: opt.Progress, start: time.Now()}
	if st, err := f.Stat(); err == nil {
		u.packed = st.Size()
	}
	out, err := u.run()
	u.endProgress()
	return out, err
}

// unpacker copies one compressed stream into a temporary file.
type unpacker struct {
	c        *Core
	ctx      context.Context
	r        io.Reader
	kind     string
	limit    int64 // bytes unpacked at most
	declared int64 // the size the ELF headers give, 0 when unknown
	packed   int64 // the compressed file's size, for messages

	dir              string
	out              *os.File
	size, written    int64 // bytes unpacked; bytes of them written (not holes)
	nextSpaceCheck   int64
	spaceCheckStride int64

	progress     io.Writer
	start, shown time.Time
	shownAny     bool
}

func (u *unpacker) run() (*os.File, error) {
	// The ELF and program headers come first: check them before anything
	// is written, so that a stream of something else, or of a core
	// claiming more than the limit, costs no more than its first bytes.
	hdr, err := u.fill(64, "")
	if err != nil {
		return nil, err
	}
	if len(hdr) < 4 || !bytes.Equal(hdr[:4], []byte(elf.ELFMAG)) {
		return nil, u.c.bad("the %s stream does not hold an ELF file", u.kind)
	}
	if what := identify(hdr); what != "" {
		return nil, u.c.bad("%s (in its %s stream)", what, u.kind)
	}
	if len(hdr) < 64 {
		return nil, u.c.bad("truncated: the %s stream ends inside the ELF header", u.kind)
	}
	headers := hdr
	phoff, phnum := binary.LittleEndian.Uint64(hdr[32:]), uint64(binary.LittleEndian.Uint16(hdr[56:]))
	phentsize := uint64(binary.LittleEndian.Uint16(hdr[54:]))
	// With PN_XNUM the count is in a section header that may be at the
	// end: then only the limit applies.
	if phnum != 0xffff && phentsize >= 56 && phoff >= 64 && phoff+phnum*phentsize <= headerLimit {
		more, err := u.fill(int(phoff+phnum*phentsize-64), "the program headers")
		if err != nil {
			return nil, err
		}
		headers = append(headers, more...)
		u.declared = declaredSize(headers, phoff, phnum, phentsize)
		if u.declared > u.limit {
			return nil, &TooLargeError{Path: u.c.Path, Limit: u.limit, Size: u.declared, Declared: true}
		}
	}
	if err := u.create(); err != nil {
		return nil, err
	}
	if err := u.write(headers); err != nil {
		u.out.Close()
		return nil, err
	}
	if err := u.copy(); err != nil {
		u.out.Close()
		return nil, err
	}
	return u.out, nil
}

// declaredSize is where the core's last segment (or its section headers)
// ends by its headers.
func declaredSize(h []byte, phoff, phnum, phentsize uint64) int64 {
	end := uint64(len(h))
	add := func(off, n uint64) {
		if off+n >= off && off+n > end {
			end = off + n
		}
	}
	shoff, shentsize, shnum := binary.LittleEndian.Uint64(h[40:]), uint64(binary.LittleEndian.Uint16(h[58:])), uint64(binary.LittleEndian.Uint16(h[60:]))
	if shoff != 0 {
		add(shoff, shentsize*shnum)
	}
	for i := uint64(0); i < phnum; i++ {
		p := h[phoff+i*phentsize:]
		add(binary.LittleEndian.Uint64(p[8:]), binary.LittleEndian.Uint64(p[32:]))
	}
	if end > 1<<62 {
		end = 1 << 62
	}
	return int64(end)
}

// fill reads n bytes of the stream into memory (fewer at its clean end).
func (u *unpacker) fill(n int, what string) ([]byte, error) {
	b := make([]byte, n)
	got, err := u.read(b)
	if err == io.EOF && what != "" {
		return nil, u.c.bad("truncated: the %s stream ends inside %s", u.kind, what)
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:got], nil
}

// read fills b from the stream: io.EOF only at the stream's clean end; a
// stream cut short is reported as truncated, never taken for a shorter
// core.
func (u *unpacker) read(b []byte) (int, error) {
	n, empty := 0, 0
	for n < len(b) {
		if err := u.ctx.Err(); err != nil {
			return n, &StoppedError{Path: u.c.Path, Err: err}
		}
		m, err := u.r.Read(b[n:])
		n += m
		if m == 0 && err == nil {
			if empty++; empty == 100 {
				err = io.ErrNoProgress
			}
		} else {
			empty = 0
		}
		switch {
		case err == io.EOF:
			return n, io.EOF
		case errors.Is(err, io.ErrUnexpectedEOF):
			return n, u.c.bad("truncated: the %s stream ends before its end, after %d bytes unpacked", u.kind, u.size+int64(n))
		case err != nil:
			return n, u.c.bad("the %s stream is damaged: %v", u.kind, err)
		}
	}
	return n, nil
}

// create opens the temporary file in $TMPDIR, unlinked from the start
// where the file system allows (O_TMPFILE), else right after: no exit path,
// not even SIGKILL, can leave it behind.
func (u *unpacker) create() error {
	u.dir = os.TempDir()
	fd, err := unix.Open(u.dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		u.out = os.NewFile(uintptr(fd), u.dir+"/(unpacked "+u.c.Path+")")
	} else {
		f, err := os.CreateTemp(u.dir, "arenactl-core-")
		if err != nil {
			return fmt.Errorf("unpacking %s: %w", u.c.Path, err)
		}
		os.Remove(f.Name())
		u.out = f
	}
	return u.checkSpace()
}

// checkSpace stops the unpack when the temporary directory's file system
// is about to fill up (keeping min(1 GiB, 5%) of it free for everyone
// else); it is checked again after every stride of written bytes.
func (u *unpacker) checkSpace() error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(u.out.Fd()), &st); err != nil {
		return nil // nothing to go by: the writes will say
	}
	free, total := int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize
	reserve := min(1<<30, total/20)
	if free <= reserve {
		return &SpaceError{Path: u.c.Path, Dir: u.dir, Free: free, Written: u.written}
	}
	u.spaceCheckStride = max(1<<20, min(64<<20, (free-reserve)/4))
	u.nextSpaceCheck = u.written + u.spaceCheckStride
	return nil
}

// copy unpacks the rest of the stream, bounded by the limit and by the end
// the headers describe.
func (u *unpacker) copy() error {
	buf := make([]byte, 256<<10)
	bound := u.limit
	if u.declared > 0 {
		bound = min(bound, u.declared+trailerSlack)
	}
	for {
		n, err := u.read(buf)
		if n > 0 {
			if u.size+int64(n) > bound {
				if u.declared > 0 && bound < u.limit {
					return u.c.bad("the %s stream unpacks past the end its ELF headers describe (%d bytes)", u.kind, u.declared)
				}
				return &TooLargeError{Path: u.c.Path, Limit: u.limit, Size: u.size + int64(n)}
			}
			if werr := u.write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			// Frames end cleanly: a stream cut between two of them is
			// seen only by the headers.
			if u.size < u.declared {
				return u.c.bad("truncated: the %s stream ends after %d bytes unpacked, its ELF headers describe %d", u.kind, u.size, u.declared)
			}
			return u.out.Truncate(u.size)
		}
		if err != nil {
			return err
		}
		u.showProgress()
	}
}

// write appends b, seeking over runs of zeros instead of writing them:
// kernel cores are mostly holes, and an unpacked copy should not cost the
// disk more than the original did.
func (u *unpacker) write(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), 64<<10)
		chunk := b[:n]
		b = b[n:]
		if allZero(chunk) {
			if _, err := u.out.Seek(int64(n), io.SeekCurrent); err != nil {
				return err
			}
		} else {
			if _, err := u.out.Write(chunk); err != nil {
				if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
					return &SpaceError{Path: u.c.Path, Dir: u.dir, Written: u.written}
				}
				return fmt.Errorf("unpacking %s: %w", u.c.Path, err)
			}
			u.written += int64(n)
		}
		u.size += int64(n)
	}
	if u.written >= u.nextSpaceCheck && u.spaceCheckStride > 0 {
		return u.checkSpace()
	}
	return nil
}

func (u *unpacker) showProgress() {
	if u.progress == nil {
		return
	}
	now := time.Now()
	if now.Sub(u.start) < time.Second || now.Sub(u.shown) < time.Second {
		return
	}
	u.shown, u.shownAny = now, true
	of := ""
	if u.declared > 0 {
		of = " of " + sizeString(u.declared)
	}
	fmt.Fprintf(u.progress, "\rarenactl: unpacking %s: %s%s (Ctrl-C stops)\x1b[K", u.c.Path, sizeString(u.size), of)
}

func (u *unpacker) endProgress() {
	if u.shownAny {
		fmt.Fprint(u.progress, "\r\x1b[K")
	}
}

func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGT"[i-1])
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
