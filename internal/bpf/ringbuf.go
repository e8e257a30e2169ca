package bpf

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring reads a MapRingbuf map from memory, as the kernel lays it out
// (kernel/bpf/ringbuf.c): a consumer page arenactl writes its position
// to, a producer page, and the data mapped twice in a row so that a
// record that wraps reads as one.
type Ring struct {
	m        *Map
	cons     []byte // the consumer page
	prod     []byte // the producer page, then the data twice
	mask     uint64
	consPos  *uint64
	prodPos  *uint64
	dataBase int
}

// Record header bits (BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT) and
// the header's size (BPF_RINGBUF_HDR_SZ).
const (
	ringBusy    = 1 << 31
	ringDiscard = 1 << 30
	ringHdr     = 8
)

// NewRing creates a ring buffer map of size bytes (a power of two, pages
// at least) and maps it.
func NewRing(size uint32, name string) (*Ring, error) {
	m, err := NewMap(MapRingbuf, 0, 0, size, name)
	if err != nil {
		return nil, err
	}
	page := os.Getpagesize()
	cons, err := unix.Mmap(m.FD, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		m.Close()
		return nil, wrap("mapping the eBPF ring", err)
	}
	prod, err := unix.Mmap(m.FD, int64(page), page+2*int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(cons)
		m.Close()
		return nil, wrap("mapping the eBPF ring", err)
	}
	return &Ring{m: m, cons: cons, prod: prod, mask: uint64(size) - 1, dataBase: page,
		consPos: (*uint64)(unsafe.Pointer(&cons[0])), prodPos: (*uint64)(unsafe.Pointer(&prod[0]))}, nil
}

// Map is the ring's map, for a program to write to.
func (r *Ring) Map() *Map { return r.m }

// Read hands every committed record to f, in the order reserved, and
// frees their room; rec is valid during the call only.
func (r *Ring) Read(f func(rec []byte)) {
	cons := atomic.LoadUint64(r.consPos)
	prod := atomic.LoadUint64(r.prodPos)
	for cons < prod {
		off := r.dataBase + int(cons&r.mask)
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.prod[off])))
		if hdr&ringBusy != 0 {
			break // still being written: the next Read takes it
		}
		n := int(hdr &^ (ringBusy | ringDiscard))
		if hdr&ringDiscard == 0 {
			f(r.prod[off+ringHdr : off+ringHdr+n])
		}
		cons += uint64(n+ringHdr+7) &^ 7
		atomic.StoreUint64(r.consPos, cons)
	}
}

// Close unmaps the ring and closes its map.
func (r *Ring) Close() error {
	unix.Munmap(r.prod)
	unix.Munmap(r.cons)
	return r.m.Close()
}
