package record

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/report"
)

// The file: Magic, then frames, each
//
//	length  uint32, little-endian: the bytes of kind and payload
//	crc     uint32, little-endian: CRC-32C of kind and payload
//	kind    one byte (frame*)
//	payload the zstd compression of one JSON value of the model
//
// A frame is appended with one write(2) once whole, so that arenactl
// killed at any moment leaves every frame before the one being written
// (the kernel keeps what was written when the writer dies); a reader
// stops at the first frame that is short or fails its checksum. The
// intervals are replayed into a Store, so a file holds the same
// recording as the memory of the arenactl that wrote it.
const Magic = "ARENAREC"

const (
	frameMeta     = 'M' // report.RecordingMeta; the first frame
	frameStack    = 'S' // report.RecordedStack
	frameInterval = 'I' // report.RecordedInterval
	frameEvent    = 'E' // report.RecordingEvent
	frameEnd      = 'X' // report.RecordingEnd
)

// maxFrame bounds a frame's length and what its payload may expand to
// (a reader's memory on a hostile file); the writer's largest frame, an
// interval of MaxStacks stacks, is far below.
const maxFrame = 64 << 20

// What a reader accepts of a description: more than any writer asks
// for (MaxIntervals(DefaultTiers) is about 2,800; --max-stacks at most
// 10,000).
const (
	maxReadIntervals = 1 << 16
	maxReadStacks    = MaxStacksLimit
	// A stack's frames, and all stacks' together, roughly in memory.
	maxReadFrames     = 4096
	maxReadStackBytes = 1 << 30
)

// stackSize is about what a stack takes in memory.
func stackSize(st report.RecordedStack) int {
	n := 64
	for _, f := range st.Frames {
		n += 128 + len(f.Function) + len(f.Mangled) + len(f.File) + len(f.Module) + len(f.BuildID)
	}
	return n
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FormatError is a recording file that is not one, or of a later
// format.
type FormatError struct {
	Path string
	Msg  string
}

func (e *FormatError) Error() string        { return e.Path + ": " + e.Msg }
func (e *FormatError) Is(target error) bool { return target == errkind.ErrBadRecording }

// Writer appends a recording to its file, and compacts the file when it
// has grown past its bound.
type Writer struct {
	f    *os.File
	path string
	enc  *zstd.Encoder
	buf  []byte // the frame being made, reused
	size int64
	// compactAt: the file is rewritten whole when it reaches this size.
	compactAt int64
	maxDisk   int64
	// Compactions counts the rewrites.
	Compactions int
}

// minCompact is the least size a file grows to before it is compacted.
const minCompact = 1 << 20

// Create makes a new recording file at path, 0600, refusing a path that
// is there already (a symbolic link included: none is followed) — a
// recording never replaces a file — and writes the store's recording so
// far. maxDisk bounds the file's size: it is compacted before it passes
// it, unless the compacted recording alone is larger (the bound is then
// twice that).
func Create(path string, s *Store, maxDisk int64) (*Writer, error) {
	f, err := createExcl(path)
	if err != nil {
		return nil, err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &Writer{f: f, path: path, enc: enc, maxDisk: maxDisk}
	if err := w.writeAll(s.Recording()); err != nil {
		f.Close()
		return nil, err
	}
	w.setBound()
	return w, nil
}

func createExcl(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0o600)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0o600)
	}
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// setBound sets the size at which the file is compacted next: twice the
// compacted size, at least minCompact, at most maxDisk where that is
// above the compacted size.
func (w *Writer) setBound() {
	w.compactAt = max(2*w.size, minCompact)
	if w.maxDisk > 0 && w.maxDisk > w.size && w.compactAt > w.maxDisk {
		w.compactAt = w.maxDisk
	}
}

// Size is the file's size now.
func (w *Writer) Size() int64 { return w.size }

// Path is the file's path.
func (w *Writer) Path() string { return w.path }

func (w *Writer) writeAll(rec *report.Recording) error {
	if _, err := w.f.Write([]byte(Magic)); err != nil {
		return err
	}
	w.size = int64(len(Magic))
	if err := w.frame(frameMeta, rec.Meta); err != nil {
		return err
	}
	for _, st := range rec.Stacks {
		if err := w.frame(frameStack, st); err != nil {
			return err
		}
	}
	// Events and intervals in time order, so that a reader cut anywhere
	// has each event with the intervals before it.
	ei := 0
	for i := range rec.Intervals {
		for ; ei < len(rec.Events) && !rec.Events[ei].At.After(rec.Intervals[i].End()); ei++ {
			if err := w.frame(frameEvent, rec.Events[ei]); err != nil {
				return err
			}
		}
		if err := w.frame(frameInterval, rec.Intervals[i]); err != nil {
			return err
		}
	}
	for ; ei < len(rec.Events); ei++ {
		if err := w.frame(frameEvent, rec.Events[ei]); err != nil {
			return err
		}
	}
	if rec.End != nil {
		return w.frame(frameEnd, *rec.End)
	}
	return nil
}

// frame appends one frame with one write.
func (w *Writer) frame(kind byte, v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b := append(w.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0, kind)
	b = w.enc.EncodeAll(js, b)
	if len(b)-8 > maxFrame {
		return fmt.Errorf("%s: a frame of %d bytes is over the format's %d", w.path, len(b)-8, maxFrame)
	}
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b)-8))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
	if _, err := w.f.Write(b); err != nil {
		return &os.PathError{Op: "write", Path: w.path, Err: err}
	}
	w.size += int64(len(b))
	w.buf = b[:0]
	return nil
}

// Stack, Interval, Event and End append one item to the file; Interval
// compacts it first when it has reached its bound.
func (w *Writer) Stack(st report.RecordedStack) error { return w.frame(frameStack, st) }
func (w *Writer) Event(e report.RecordingEvent) error { return w.frame(frameEvent, e) }
func (w *Writer) End(e report.RecordingEnd) error     { return w.frame(frameEnd, e) }

// Interval appends iv, which s has been given already; when the file has
// grown to its bound, it is rewritten from s instead.
func (w *Writer) Interval(iv report.RecordedInterval, s *Store) error {
	if w.size >= w.compactAt {
		return w.Compact(s)
	}
	return w.frame(frameInterval, iv)
}

// Compact rewrites the file from s: the new file is written under a
// temporary name in the same directory and renamed over the old one, so
// the path holds a whole recording at every moment.
func (w *Writer) Compact(s *Store) error {
	dir := filepath.Dir(w.path)
	var f *os.File
	var err error
	for try := 0; ; try++ {
		tmp := filepath.Join(dir, "."+filepath.Base(w.path)+".compact-"+strconv.FormatInt(time.Now().UnixNano()+int64(try), 36))
		if f, err = createExcl(tmp); err == nil || !errors.Is(err, unix.EEXIST) || try == 10 {
			break
		}
	}
	if err != nil {
		return err
	}
	old := w.f
	w.f = f
	if err := w.writeAll(s.Recording()); err != nil {
		f.Close()
		os.Remove(f.Name())
		w.f = old
		return err
	}
	if err := os.Rename(f.Name(), w.path); err != nil {
		f.Close()
		os.Remove(f.Name())
		w.f = old
		return err
	}
	old.Close()
	w.Compactions++
	w.setBound()
	return nil
}

// Close closes the file.
func (w *Writer) Close() error {
	w.enc.Close()
	return w.f.Close()
}

// ReadInfo says how a file read ended.
type ReadInfo struct {
	// Frames read whole; Cut says the file ended inside a frame or at
	// one that failed its checksum (arenactl was killed while writing
	// it, or the file was damaged), after Frames.
	Frames int
	Cut    bool
	// Bytes is the file's length.
	Bytes int64
}

// Read reads the recording at path (a symbolic link is not followed),
// up to its last whole frame.
func Read(path string) (*report.Recording, ReadInfo, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		if err == unix.ELOOP {
			return nil, ReadInfo{}, &FormatError{Path: path, Msg: "is a symbolic link; a recording is read only from a regular file"}
		}
		return nil, ReadInfo{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, ReadInfo{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, ReadInfo{}, &FormatError{Path: path, Msg: "is not a regular file"}
	}
	rec, info, err := ReadFrom(bufio.NewReaderSize(f, 1<<16), path)
	info.Bytes = fi.Size()
	return rec, info, err
}

// ReadFrom reads a recording from r (named name in errors).
func ReadFrom(r io.Reader, name string) (*report.Recording, ReadInfo, error) {
	var info ReadInfo
	head := make([]byte, len(Magic))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != Magic {
		return nil, info, &FormatError{Path: name, Msg: "is not an arenactl recording (it does not begin with " + Magic + ")"}
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxFrame), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, info, err
	}
	defer dec.Close()
	var s *Store
	var hdr [8]byte
	var body, js []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			info.Cut = err != io.EOF
			break
		}
		n := binary.LittleEndian.Uint32(hdr[0:])
		if n < 1 || n > maxFrame {
			info.Cut = true
			break
		}
		body = slices.Grow(body[:0], int(n))[:n]
		if _, err := io.ReadFull(r, body); err != nil || crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			info.Cut = true
			break
		}
		if js, err = dec.DecodeAll(body[1:], js[:0]); err != nil {
			info.Cut = true
			break
		}
		kind := body[0]
		if s == nil && kind != frameMeta {
			return nil, info, &FormatError{Path: name, Msg: "does not begin with the recording's description"}
		}
		if err := apply(&s, kind, js); err != nil {
			return nil, info, &FormatError{Path: name, Msg: fmt.Sprintf("frame %d: %v", info.Frames+1, err)}
		}
		info.Frames++
	}
	if s == nil {
		return nil, info, &FormatError{Path: name, Msg: "holds no whole frame: the recording was cut before it began"}
	}
	s.replaying = false
	return s.Recording(), info, nil
}

// apply adds one frame's value to the store (made by the meta frame).
func apply(s **Store, kind byte, js []byte) error {
	switch kind {
	case frameMeta:
		var m report.RecordingMeta
		if err := json.Unmarshal(js, &m); err != nil {
			return err
		}
		if m.Format > report.RecordingFormat || m.Format < 1 {
			return fmt.Errorf("format %d; this arenactl reads format %d", m.Format, report.RecordingFormat)
		}
		if *s != nil {
			return errors.New("a second description")
		}
		if m.Interval <= 0 || len(m.Tiers) == 0 || len(m.Tiers) > 16 {
			return errors.New("a description without intervals")
		}
		for _, t := range m.Tiers {
			if t.Step <= 0 || t.Span < 0 || t.MaxIntervals < 0 {
				return errors.New("a tier out of range")
			}
		}
		// A reader's memory is bounded as the writer's was: a file
		// that asks for more is not one arenactl wrote.
		if m.Tiers[len(m.Tiers)-1].Span != 0 || MaxIntervals(m.Tiers) > maxReadIntervals || m.MaxStacks < 0 || m.MaxStacks > maxReadStacks {
			return errors.New("a description asking for more intervals or stacks than a recording keeps")
		}
		*s = NewStore(m)
		(*s).replaying = true
	case frameStack:
		var st report.RecordedStack
		if err := json.Unmarshal(js, &st); err != nil {
			return err
		}
		if len(st.Frames) > maxReadFrames {
			return errors.New("a stack of more frames than arenactl unwinds")
		}
		if old, ok := (*s).stacks[st.ID]; ok {
			(*s).stackBytes -= stackSize(old)
		}
		(*s).AddStack(st)
		if (*s).stackBytes += stackSize(st); (*s).stackBytes > maxReadStackBytes {
			return errors.New("more stacks than a recording keeps")
		}
	case frameInterval:
		var iv report.RecordedInterval
		if err := json.Unmarshal(js, &iv); err != nil {
			return err
		}
		if len(iv.Held) > (*s).rec.Meta.MaxStacks {
			return errors.New("an interval naming more stacks than the recording keeps")
		}
		(*s).Add(iv)
	case frameEvent:
		var e report.RecordingEvent
		if err := json.Unmarshal(js, &e); err != nil {
			return err
		}
		(*s).AddEvent(e)
	case frameEnd:
		var e report.RecordingEnd
		if err := json.Unmarshal(js, &e); err != nil {
			return err
		}
		(*s).SetEnd(e)
	default:
		// A kind of a later writer: skipped, as the format allows.
	}
	return nil
}
