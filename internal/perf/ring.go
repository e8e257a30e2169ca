package perf

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one CPU's mmap'd ring buffer: the kernel's control page, then
// 2^n data pages the kernel writes records into at data_head; arenactl
// reads up to it and moves data_tail.
type ring struct {
	fd   int
	mem  []byte
	data []byte // the data pages
	buf  []byte // a record that wraps, put together
}

// Offsets of struct perf_event_mmap_page's data_head and data_tail.
const (
	offDataHead = 1024
	offDataTail = 1032
)

func mapRing(fd, pages int) (*ring, error) {
	ps := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (pages+1)*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, wrap(fmt.Sprintf("perf: mapping a ring of %d KiB", pages*ps>>10), err)
	}
	return &ring{fd: fd, mem: mem, data: mem[ps:]}, nil
}

func (r *ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem, r.data = nil, nil
	}
}

// read hands every complete record between data_tail and data_head to fn
// (its type and its bytes after the 8-byte header, valid during the call)
// and gives the room back.
func (r *ring) read(fn func(typ uint32, rec []byte)) {
	head := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[offDataHead])))
	tail := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[offDataTail])))
	size := uint64(len(r.data))
	for tail+8 <= head {
		var hdr [8]byte
		r.copyOut(hdr[:], tail)
		typ := binary.LittleEndian.Uint32(hdr[0:])
		n := uint64(binary.LittleEndian.Uint16(hdr[6:]))
		if n < 8 || tail+n > head || n > size {
			break // a torn record: the kernel never writes one; stop rather than loop
		}
		if cap(r.buf) < int(n-8) {
			r.buf = make([]byte, n-8)
		}
		rec := r.buf[:n-8]
		r.copyOut(rec, tail+8)
		fn(typ, rec)
		tail += n
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.mem[offDataTail])), tail)
}

// copyOut copies len(p) bytes of the ring from position pos, wrapping.
func (r *ring) copyOut(p []byte, pos uint64) { copyAround(p, r.data, pos) }

// copyAround copies len(p) bytes of a ring's data from position pos,
// wrapping at its end.
func copyAround(p, data []byte, pos uint64) {
	off := pos % uint64(len(data))
	n := copy(p, data[off:])
	if n < len(p) {
		copy(p[n:], data)
	}
}
