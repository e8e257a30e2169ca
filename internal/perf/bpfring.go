package perf

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bpfRing reads an eBPF ring buffer (BPF_MAP_TYPE_RINGBUF) with its data
// pages mapped once.
//
// The kernel maps the data pages twice in a row (kernel/bpf/ringbuf.c,
// bpf_ringbuf_area_alloc), so that a record that wraps can be read in
// place, and cilium/ebpf's reader maps them so. Every page of such a
// mapping is in the reader's page tables from the mmap on
// (remap_vmalloc_range), twice: a 32 MiB ring showed as 64 MB of
// arenactl's RSS before a record was written, half of an idle growth
// window's. The kernel lets a reader map any part of them read-only
// (ringbuf_map_mmap_kern), so this one maps the producer's page and the
// data once and puts a record that wraps together in a buffer, as
// arenactl's perf rings do (ring.go); the others are read in place.
type bpfRing struct {
	cons []byte // the consumer's page: consumer_pos, which we write
	prod []byte // the producer's page, then the data pages
	data []byte
	mask uint64
	buf  []byte
	// done is where the record last handed out ends: its room goes back
	// to the program at the next call (or release), once it is read.
	done uint64
}

// The record header's flags (include/uapi/linux/bpf.h: BPF_RINGBUF_BUSY_BIT,
// BPF_RINGBUF_DISCARD_BIT) and its size (BPF_RINGBUF_HDR_SZ).
const (
	bpfRingBusy    = 1 << 31
	bpfRingDiscard = 1 << 30
	bpfRingHdr     = 8
)

// mapBPFRing maps the ring buffer map fd of size bytes (a power of two
// pages, as the kernel requires of its max_entries); its errors are the
// mmap's, for the caller to say what refused.
func mapBPFRing(fd int, size uint64) (*bpfRing, error) {
	ps := os.Getpagesize()
	cons, err := unix.Mmap(fd, 0, ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("its consumer page: %w", err)
	}
	prod, err := unix.Mmap(fd, int64(ps), ps+int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(cons)
		return nil, fmt.Errorf("%d KiB of data: %w", size>>10, err)
	}
	return &bpfRing{cons: cons, prod: prod, data: prod[ps:], mask: size - 1}, nil
}

func (r *bpfRing) consPos() *uint64 { return (*uint64)(unsafe.Pointer(&r.cons[0])) }
func (r *bpfRing) prodPos() *uint64 { return (*uint64)(unsafe.Pointer(&r.prod[0])) }

// available is how many bytes the program has written that are not read.
func (r *bpfRing) available() uint64 {
	return atomic.LoadUint64(r.prodPos()) - atomic.LoadUint64(r.consPos())
}

// next returns the next committed record's bytes (valid until the next
// call or release), skipping discarded ones, and gives the room of the
// one before back; ok is false when none is committed yet.
func (r *bpfRing) next() (rec []byte, ok bool) {
	r.release()
	cons := atomic.LoadUint64(r.consPos())
	for {
		prod := atomic.LoadUint64(r.prodPos())
		if cons+bpfRingHdr > prod {
			return nil, false
		}
		// Headers are 8-byte aligned and the data a power of two pages:
		// a header never wraps. The program sets it last (its busy bit
		// cleared), with release semantics (bpf_ringbuf_commit).
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.data[cons&r.mask])))
		if hdr&bpfRingBusy != 0 {
			return nil, false // reserved, not yet submitted
		}
		n := uint64(hdr &^ (bpfRingBusy | bpfRingDiscard))
		next := cons + (bpfRingHdr+n+7)&^7
		if n > r.mask || next > prod {
			// A length the kernel never writes: read no further rather
			// than past the data.
			return nil, false
		}
		if hdr&bpfRingDiscard != 0 {
			cons = next
			atomic.StoreUint64(r.consPos(), cons)
			continue
		}
		off := (cons + bpfRingHdr) & r.mask
		if off+n <= uint64(len(r.data)) {
			rec = r.data[off : off+n : off+n]
		} else {
			if uint64(cap(r.buf)) < n {
				r.buf = make([]byte, n)
			}
			rec = r.buf[:n]
			copyAround(rec, r.data, off)
		}
		r.done = next
		return rec, true
	}
}

// release gives the room of the record last handed out back to the
// program.
func (r *bpfRing) release() {
	if r.done != 0 {
		atomic.StoreUint64(r.consPos(), r.done)
		r.done = 0
	}
}

func (r *bpfRing) close() {
	if r.prod != nil {
		unix.Munmap(r.prod)
		r.prod, r.data = nil, nil
	}
	if r.cons != nil {
		unix.Munmap(r.cons)
		r.cons = nil
	}
}
