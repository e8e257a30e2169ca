package core

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

var (
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicGzip = []byte{0x1f, 0x8b}
	magicXz   = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
)

// unpack returns f itself for a plain core, or a temporary file holding the
// decompressed core: a core is read at random offsets, and compressed
// streams cannot be.
func (c *Core) unpack(f *os.File) (*os.File, error) {
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
	tmp, err := os.CreateTemp("", "arenactl-core-")
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", c.Path, err)
	}
	c.unpacked = tmp.Name()
	if err := sparseCopy(tmp, r); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		c.unpacked = ""
		return nil, c.bad("the %s stream is damaged: %v", kind, err)
	}
	return tmp, nil
}

// sparseCopy writes r to f, seeking over runs of zeros instead of writing
// them: kernel cores are mostly holes, and an unpacked copy should not cost
// the disk more than the original did.
func sparseCopy(f *os.File, r io.Reader) error {
	buf := make([]byte, 64<<10)
	var size int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if allZero(buf[:n]) {
				if _, serr := f.Seek(int64(n), io.SeekCurrent); serr != nil {
					return serr
				}
			} else if _, werr := f.Write(buf[:n]); werr != nil {
				return werr
			}
			size += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return f.Truncate(size)
		}
		if err != nil {
			return err
		}
	}
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
