package core

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// compressors make each kind of stream arenactl unpacks.
var compressors = map[string]func(b []byte) []byte{
	"zstd": func(b []byte) []byte {
		e, _ := zstd.NewWriter(nil)
		defer e.Close()
		return e.EncodeAll(b, nil)
	},
	"gzip": func(b []byte) []byte {
		var buf bytes.Buffer
		g, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		g.Write(b)
		g.Close()
		return buf.Bytes()
	},
	"xz": func(b []byte) []byte {
		var buf bytes.Buffer
		x, _ := xz.NewWriter(&buf)
		x.Write(b)
		x.Close()
		return buf.Bytes()
	},
}

// zeroChunk is how many zeros one compressed frame holds in a bomb.
const zeroChunk = 8 << 20

var (
	zeroFramesMu sync.Mutex
	zeroFrames   = map[string][]byte{}
)

// bomb is a compressed stream of head then total zero bytes, made of one
// small frame of zeros repeated (every format reads concatenated frames):
// gigabytes unpacked from a few hundred kilobytes, cheap to make.
func bomb(kind string, head []byte, total int64) []byte {
	zeroFramesMu.Lock()
	frame, ok := zeroFrames[kind]
	if !ok {
		frame = compressors[kind](make([]byte, zeroChunk))
		zeroFrames[kind] = frame
	}
	zeroFramesMu.Unlock()
	out := compressors[kind](head)
	for n := int64(0); n < total; n += zeroChunk {
		out = append(out, frame...)
	}
	return out
}

// coreClaiming is minimalCore with its PT_LOAD claiming size bytes of
// file (and memory).
func coreClaiming(size uint64) []byte {
	b := minimalCore()
	ph := b[64+56:] // the second program header, PT_LOAD
	binary.LittleEndian.PutUint64(ph[32:], size)
	binary.LittleEndian.PutUint64(ph[40:], size)
	return b
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// privateTmp points TMPDIR at an empty directory and checks, at the end,
// that nothing was left there.
func privateTmp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	t.Cleanup(func() {
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("left in TMPDIR: %v", left)
		}
	})
	return dir
}

// Decompression bombs are refused from their first bytes: a stream of
// zeros is no ELF file; a core whose headers claim more than the limit is
// refused before more is unpacked; one that runs on past the end its
// headers describe is stopped there. (Each unpacked all 4 GiB before.)
func TestUnpackBombs(t *testing.T) {
	for kind := range compressors {
		t.Run(kind, func(t *testing.T) {
			privateTmp(t)
			const huge = 4 << 30
			for _, c := range []struct {
				name string
				b    []byte
				want string
			}{
				{"zeros", bomb(kind, nil, huge), "does not hold an ELF file"},
				{"claims-1TiB", bomb(kind, coreClaiming(1<<40), huge), "more than the limit"},
				{"runs-past-its-end", bomb(kind, minimalCore(), huge), "past the end its ELF headers describe"},
				{"executable", compressors[kind](append([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00"), make([]byte, 100)...)), "not a core file"},
			} {
				p := writeFile(t, c.name+"."+kind, c.b)
				core, err := Open(p)
				if err == nil {
					core.Close()
					t.Fatalf("%s: opened", c.name)
				}
				if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), p) {
					t.Errorf("%s: %v; want %q", c.name, err, c.want)
				}
				var tl *TooLargeError
				var bad *Error
				if !errors.As(err, &tl) && !errors.As(err, &bad) {
					t.Errorf("%s: %T is neither a TooLargeError nor a core Error", c.name, err)
				}
			}
		})
	}
}

// The limit can be raised: a core of 64 MiB opens with the default, not
// with a limit of 32 MiB, and opens again with 128 MiB.
func TestUnpackLimit(t *testing.T) {
	privateTmp(t)
	raw := coreClaiming(64 << 20)
	raw = append(raw, make([]byte, 64<<20-4096)...)
	p := writeFile(t, "core.zst", compressors["zstd"](raw))
	_, err := OpenContext(context.Background(), p, Options{MaxUnpacked: 32 << 20})
	var tl *TooLargeError
	if !errors.As(err, &tl) || !tl.Declared || tl.Limit != 32<<20 {
		t.Fatalf("limit of 32 MiB: %v", err)
	}
	for _, limit := range []int64{0, 128 << 20} {
		c, err := OpenContext(context.Background(), p, Options{MaxUnpacked: limit})
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if len(c.Threads) != 1 {
			t.Errorf("threads %v", c.Threads)
		}
		c.Close()
	}
}

// A compressed stream cut short is reported as truncated, wherever the
// cut falls, never read as a shorter core.
func TestUnpackTruncated(t *testing.T) {
	raw := coreClaiming(16 << 20)
	for i := 4096; i < len(raw); i++ {
		raw[i] = byte(i * 7)
	}
	raw = append(raw, bytes.Repeat([]byte{1, 2, 3, 5, 8}, (16<<20-4096)/5+1)[:16<<20-4096]...)
	for kind, compress := range compressors {
		privateTmp(t)
		whole := compress(raw)
		// Two frames, cut between them: the stream's end is clean, the
		// core's is not.
		frames := append(compress(raw[:1<<20]), compress(raw[1<<20:])...)
		for name, b := range map[string][]byte{
			"half": whole[:len(whole)/2], "end": whole[:len(whole)-8], "between-frames": frames[:len(compress(raw[:1<<20]))],
		} {
			p := writeFile(t, name+"."+kind, b)
			c, err := Open(p)
			if err == nil {
				c.Close()
				t.Errorf("%s %s: opened", kind, name)
				continue
			}
			if !strings.Contains(err.Error(), "truncated") {
				t.Errorf("%s %s: %v", kind, name, err)
			}
		}
	}
}

// cancelOnWrite cancels a context when written to: the unpack's first
// progress line.
type cancelOnWrite struct {
	cancel context.CancelFunc
	buf    bytes.Buffer
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.cancel()
	return c.buf.Write(p)
}

// A long unpack shows progress (after a second) and stops when its
// context is cancelled (SIGINT did nothing before), leaving nothing behind.
func TestUnpackProgressAndCancel(t *testing.T) {
	privateTmp(t)
	raw := coreClaiming(1 << 40)
	p := writeFile(t, "core.zst", bomb("zstd", raw, 1<<40))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelOnWrite{cancel: cancel}
	_, err := OpenContext(ctx, p, Options{MaxUnpacked: 2 << 40, Progress: w})
	var stopped *StoppedError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &stopped) {
		t.Fatalf("err %v", err)
	}
	out := w.buf.String()
	if !strings.Contains(out, "unpacking "+p) || !strings.Contains(out, "of 1.0 TiB") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("progress %q", out)
	}
}

// A temporary directory without room stops the unpack with a SpaceError
// before the file system is full.
func TestUnpackNoSpace(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	t.Setenv("TMPDIR", dir)
	raw := coreClaiming(64 << 20)
	raw = append(raw, bytes.Repeat([]byte{1}, 64<<20-4096)...)
	p := writeFile(t, "core.zst", compressors["zstd"](raw))
	_, err := Open(p)
	var se *SpaceError
	if !errors.As(err, &se) || se.Dir != dir {
		t.Fatalf("err %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left: %v", left)
	}
}
