package procfs

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pagemap reads /proc/PID/pagemap, which says for every page of the target
// whether it is in RAM or in swap. It implements predict.Residency.
//
// Two questions are asked of it, with two rules: Resident is "would
// madvise(MADV_DONTNEED) lower RSS" (the trim prediction), Runs is "does the
// page hold data" (what a snapshot must write). A swapped page holds data
// but is not resident; the shared zero page is present but holds nothing.
type Pagemap struct {
	f    *os.File
	page uint64
	zero uint64 // the zero page's frame number; 0 when frames are hidden

	// The last block of entries read for a short range: a walk's free
	// chunks are asked about one by one, in address order, and one read
	// of a block serves every chunk in its 2 MiB instead of a read each.
	mu       sync.Mutex
	blk      []byte
	blkFirst uint64 // the block's first page number; blk is nil when none
}

// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent   = 1 << 63
	pmSwapped   = 1 << 62
	pmFile      = 1 << 61 // file page or shared anonymous
	pmExclusive = 1 << 56 // mapped by this process only
	pmGuard     = 1 << 58 // a guard region (madvise MADV_GUARD_INSTALL): any access faults
	pmPFN       = 1<<55 - 1
	pmBatch     = 64 << 10 // entries per read: 512 KiB, 256 MiB of address space
	pmBlock     = 512      // entries of the block kept for short ranges: 4 KiB
)

// OpenPagemap opens the pagemap of pid. Close it when done.
func OpenPagemap(pid int) (*Pagemap, error) { return ByPid(pid).OpenPagemap() }

// OpenPagemap opens the pagemap of the process p holds.
func (p *Proc) OpenPagemap() (*Pagemap, error) {
	pid := p.Pid
	// Through a live thread: an exited main thread has no pages to show.
	dir, err := p.LiveDir()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(dir + "/pagemap")
	if err != nil {
		return nil, Error(pid, fmt.Errorf("reading which pages are resident: %w", err))
	}
	return &Pagemap{f: f, page: uint64(os.Getpagesize()), zero: zeroPFN()}, nil
}

// Resident returns how many bytes of the pages overlapping [start, end) are
// resident: counted in the process's RSS, so that madvise(MADV_DONTNEED)
// would release them. Swapped pages are not (releasing them frees swap),
// and neither is the shared zero page, which a read of never-written (or
// already released) memory maps, arenactl's own reads included: it is
// "present" in the pagemap but not in RSS. Frame numbers tell it apart; a
// reader without CAP_SYS_ADMIN sees none, and then only pages mapped by
// this process alone (or file-backed) are counted, which leaves out anonymous
// pages still shared with a forked child.
func (p *Pagemap) Resident(start, end uint64) (uint64, error) {
	return p.sum(start, end, p.counts)
}

// Guarded is how many bytes of the pages in [start, end) are guard regions
// (madvise MADV_GUARD_INSTALL): no access reaches them, so they hold
// nothing. 0 on a kernel whose pagemap does not mark them.
func (p *Pagemap) Guarded(start, end uint64) (uint64, error) {
	return p.sum(start, end, func(e uint64) bool { return e&pmGuard != 0 })
}

// GuardRuns calls fn for each run of guard-region pages in [start, end),
// in address order: what reads of the range would fault on though the
// mapping is readable.
func (p *Pagemap) GuardRuns(start, end uint64, fn func(start, end uint64)) error {
	first, last := start/p.page, (end+p.page-1)/p.page
	buf := make([]byte, 8*min(last-first, pmBatch))
	var run uint64
	in := false
	for pg := first; pg < last; {
		cnt := min(last-pg, pmBatch)
		b := buf[:8*cnt]
		if _, err := p.f.ReadAt(b, int64(pg*8)); err != nil {
			return fmt.Errorf("reading the pagemap at %#x: %w", pg*p.page, err)
		}
		for i := uint64(0); i < cnt; i++ {
			g := binary.LittleEndian.Uint64(b[8*i:])&pmGuard != 0
			switch at := (pg + i) * p.page; {
			case g && !in:
				run, in = at, true
			case !g && in:
				fn(run, at)
				in = false
			}
		}
		pg += cnt
	}
	if in {
		fn(run, last*p.page)
	}
	return nil
}

// sum is how many bytes of the pages in [start, end) have an entry that
// counts.
func (p *Pagemap) sum(start, end uint64, counts func(uint64) bool) (uint64, error) {
	first, last := start/p.page, (end+p.page-1)/p.page
	if last > first && last-first <= pmBlock/2 {
		return p.sumShort(first, last, counts)
	}
	buf := make([]byte, 8*min(last-first, pmBatch))
	var n uint64
	for pg := first; pg < last; {
		cnt := min(last-pg, pmBatch)
		b := buf[:8*cnt]
		if _, err := p.f.ReadAt(b, int64(pg*8)); err != nil {
			return 0, fmt.Errorf("reading the pagemap at %#x: %w", pg*p.page, err)
		}
		for i := uint64(0); i < cnt; i++ {
			if counts(binary.LittleEndian.Uint64(b[8*i:])) {
				n += p.page
			}
		}
		pg += cnt
	}
	return n, nil
}

// sumShort is sum for pages [first, last) that fit in one or two blocks,
// read through the kept block.
func (p *Pagemap) sumShort(first, last uint64, counts func(uint64) bool) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n uint64
	for pg := first; pg < last; pg++ {
		if p.blk == nil || pg < p.blkFirst || pg >= p.blkFirst+uint64(len(p.blk)/8) {
			if p.blk == nil {
				p.blk = make([]byte, 8*pmBlock)
			}
			p.blkFirst = pg &^ (pmBlock - 1)
			if _, err := p.f.ReadAt(p.blk, int64(p.blkFirst*8)); err != nil {
				p.blk = nil
				return 0, fmt.Errorf("reading the pagemap at %#x: %w", pg*p.page, err)
			}
		}
		if counts(binary.LittleEndian.Uint64(p.blk[8*(pg-p.blkFirst):])) {
			n += p.page
		}
	}
	return n, nil
}

func (p *Pagemap) counts(e uint64) bool {
	switch pfn := e & pmPFN; {
	case e&pmPresent == 0:
		return false
	case pfn != 0 && p.zero != 0:
		return pfn != p.zero
	}
	return e&(pmExclusive|pmFile) != 0
}

// Runs splits [start, end) into runs of pages that hold data (present or
// swapped) and pages that do not (never touched, or given back: they read
// as zeros), calling fn for each run in address order.
func (p *Pagemap) Runs(start, end uint64, fn func(start, end uint64, data bool)) error {
	buf := make([]byte, 8*min((end-start)/p.page, pmBatch))
	run, runData := start, true
	for pg := start; pg < end; {
		n := min((end-pg)/p.page, pmBatch)
		if n == 0 {
			break // not a whole page: the caller's ranges are page-aligned
		}
		b := buf[:8*n]
		if _, err := p.f.ReadAt(b, int64(pg/p.page*8)); err != nil {
			return fmt.Errorf("reading the pagemap at %#x: %w", pg, err)
		}
		for i := uint64(0); i < n; i, pg = i+1, pg+p.page {
			data := binary.LittleEndian.Uint64(b[8*i:])&(pmPresent|pmSwapped) != 0
			if data == runData {
				continue
			}
			if pg > run {
				fn(run, pg, runData)
			}
			run, runData = pg, data
		}
	}
	if end > run {
		fn(run, end, runData)
	}
	return nil
}

// Close releases the file.
func (p *Pagemap) Close() error { return p.f.Close() }

// zeroPFN finds the zero page's frame number: a read of a fresh private
// anonymous page of our own maps it. It is 0 when frame numbers are hidden
// from us.
var zeroPFN = sync.OnceValue(func() uint64 {
	page := os.Getpagesize()
	b, err := unix.Mmap(-1, 0, page, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0
	}
	defer unix.Munmap(b)
	touch(b)
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0
	}
	defer f.Close()
	var e [8]byte
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	if _, err := f.ReadAt(e[:], int64(addr/uint64(page)*8)); err != nil {
		return 0
	}
	v := binary.LittleEndian.Uint64(e[:])
	if v&pmPresent == 0 {
		return 0
	}
	return v & pmPFN
})

var sink byte

// touch reads the page, which a store the compiler must keep depends on.
func touch(b []byte) { sink = b[0] }
