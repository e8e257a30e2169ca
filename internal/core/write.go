package core

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
)

// PageSize is the x86_64 page size: every dumped range starts and ends on
// one, as in a kernel core.
const PageSize = 4096

// Memory is where Write reads the bytes it dumps (a frozen live process).
type Memory interface {
	ReadAt(p []byte, addr uint64) (int, error)
}

// Snapshot is what a Writer puts into a core besides memory: a process's
// identity, its threads' registers, its auxiliary vector and its mapping
// list. Every mapping gets PT_LOAD headers, so that the address space is
// described whole, but only the ranges given to Dump have contents: the
// rest is mapped and not dumped, as in a kernel core for the areas its
// filter leaves out.
type Snapshot struct {
	Pid, PPid, Pgrp, Sid int
	Uid, Gid             uint32
	State                byte   // /proc/PID/stat's state letter ('S', 'T', ...)
	Command              string // comm: pr_fname, 15 bytes kept
	Args                 string // the command line, arguments separated by spaces: pr_psargs, 79 bytes kept
	// Threads are the threads' registers; the first is the one debuggers
	// select first: put the main thread there. A thread's XState, when
	// there, is written as NT_X86_XSTATE, its first 512 bytes as
	// NT_PRFPREG; empty, neither note is.
	Threads  []debuggee.Thread
	Auxv     []byte         // /proc/PID/auxv as read
	Mappings []maps.Mapping // every mapping in address order, smaps counters included if read
}

// WriteStats says what a Writer wrote.
type WriteStats struct {
	Size       int64  // bytes of the core file
	Dumped     uint64 // bytes of process memory written
	Segments   int    // PT_LOAD headers
	Zeros      uint64 // bytes of the dumped ranges that read as zeros: listed, not written
	Unreadable uint64 // bytes of the dumped ranges the process would not give: left out
}

// Note names and types arenactl adds to what the kernel writes.
const (
	ntPrfpreg   = 2
	ntX86Xstate = 0x202
	// noteArenactl/ntMaps is the process's mapping list in /proc/PID/smaps
	// format: names the kernel's NT_FILE cannot carry ([heap], [stack],
	// [anon: ...]), PROT_NONE reservations, and RSS at the time.
	noteArenactl = "ARENACTL"
	ntMaps       = 1
	// ntZeros lists (start, end) pairs of memory that reads as zeros but
	// has no bytes in the file.
	ntZeros = 2
)

// NoteAllocator is the type of the ARENACTL note in which a snapshot
// records what it knew of the allocator (glibc.Record), so that reading the
// snapshot needs no libc file. The core package only carries it.
const NoteAllocator = 3

// Sizes of the kernel's x86_64 note structures and of ELF headers.
const (
	prstatusSize    = 336
	prstatusFpvalid = 328
	prpsinfoSize    = 136
	prpsinfoArgs    = 56
	fxsaveSize      = 512
	ehdrSize        = 64
	phdrSize        = 56
	maxPhnum        = 0xffff - 1 // PN_XNUM would be needed beyond
	copyChunk       = 4 << 20
)

// ErrTooManySegments: the snapshot would need more program headers than an
// ELF header can count.
var ErrTooManySegments = errors.New("too many memory areas for one core")

// Writer writes a core in three steps: NewWriter writes the notes, Dump
// appends memory (as often as needed, for instance while something else
// finds out what more to dump), Close writes the program headers (after
// the memory: their number is known last) and the ELF header.
//
// Pages that read as zeros are not written: they are listed in a note of
// their own, which Core.ReadAt honours, so that a snapshot costs the disk
// what the process's memory holds, not what it maps.
type Writer struct {
	w      io.WriterAt
	ms     []maps.Mapping
	notes  uint64       // bytes of notes, right after the ELF header
	off    uint64       // where the next dumped byte goes
	placed []placed     // every dumped run of pages with its file offset
	zeros  []maps.Range // pages that read as zeros, not written
	extra  []extraNote
	st     WriteStats
}

type extraNote struct {
	typ  uint32
	desc []byte
}

// placed is a dumped run of pages and where its bytes are in the file.
type placed struct {
	maps.Range
	off uint64
}

// NewWriter starts a core of s in w.
func NewWriter(w io.WriterAt, s *Snapshot) (*Writer, error) {
	if len(s.Threads) == 0 {
		return nil, errors.New("a core needs at least one thread")
	}
	notes := buildNotes(s)
	if _, err := w.WriteAt(notes, ehdrSize); err != nil {
		return nil, err
	}
	n := uint64(len(notes))
	return &Writer{w: w, ms: s.Mappings, notes: n, off: alignUp(ehdrSize+n, PageSize)}, nil
}

// Zeros records ranges that read as zeros without reading them: pages of
// anonymous memory that were never touched (not resident, not in swap).
// They must not overlap dumped memory.
func (w *Writer) Zeros(rs []maps.Range) {
	for _, r := range rs {
		w.zero(r.Start, r.End)
		w.st.Zeros += r.End - r.Start
	}
}

// Dump appends the memory of rs, read from mem in chunks, so that no more
// than one chunk of the process's memory is held at once. rs must be
// page-aligned, sorted, disjoint from each other and from every range dumped
// before, and inside the mappings. It stops between chunks when ctx is done,
// returning ctx's error.
func (w *Writer) Dump(ctx context.Context, mem Memory, rs []maps.Range) error {
	for i, r := range rs {
		if r.Start%PageSize != 0 || r.End%PageSize != 0 || r.End <= r.Start {
			return fmt.Errorf("dump range %#x-%#x is empty or not page-aligned", r.Start, r.End)
		}
		if i > 0 && r.Start < rs[i-1].End {
			return fmt.Errorf("dump range %#x-%#x is out of order or overlaps the one before", r.Start, r.End)
		}
	}
	buf := make([]byte, min(copyChunk, totalSize(rs)))
	for _, r := range rs {
		for a := r.Start; a < r.End; {
			if err := ctx.Err(); err != nil {
				return err
			}
			b := buf[:min(uint64(len(buf)), r.End-a)]
			bad := readPages(mem, b, a)
			// Runs of pages of one kind: contents to write, zeros to
			// list, or unreadable (left out).
			for i := 0; i < len(b); {
				kind := pageKind(b, bad, i)
				j := i + PageSize
				for j < len(b) && pageKind(b, bad, j) == kind {
					j += PageSize
				}
				start, end := a+uint64(i), a+uint64(j)
				switch kind {
				case pageData:
					if _, err := w.w.WriteAt(b[i:j], int64(w.off)); err != nil {
						return err
					}
					w.place(start, end)
					w.st.Dumped += end - start
				case pageZero:
					w.zero(start, end)
					w.st.Zeros += end - start
				default:
					w.st.Unreadable += end - start
				}
				i = j
			}
			a += uint64(len(b))
		}
	}
	return nil
}

const (
	pageData = iota
	pageZero
	pageBad
)

var zeroPage [PageSize]byte

func pageKind(b []byte, bad []bool, i int) int {
	switch {
	case bad != nil && bad[i/PageSize]:
		return pageBad
	case bytes.Equal(b[i:i+PageSize], zeroPage[:]):
		return pageZero
	}
	return pageData
}

// place notes the page run [start, end) as written at w.off, and moves w.off
// past it.
func (w *Writer) place(start, end uint64) {
	if n := len(w.placed); n > 0 && w.placed[n-1].End == start && w.placed[n-1].off+(start-w.placed[n-1].Start) == w.off {
		w.placed[n-1].End = end
	} else {
		w.placed = append(w.placed, placed{maps.Range{Start: start, End: end}, w.off})
	}
	w.off += end - start
}

func (w *Writer) zero(start, end uint64) {
	if n := len(w.zeros); n > 0 && w.zeros[n-1].End == start {
		w.zeros[n-1].End = end
		return
	}
	w.zeros = append(w.zeros, maps.Range{Start: start, End: end})
}

func totalSize(rs []maps.Range) uint64 {
	n := uint64(0)
	for _, r := range rs {
		n += r.End - r.Start
	}
	return n
}

// AddNote adds an ARENACTL note of type typ (NoteAllocator, say) to the
// core; Close writes it after the memory, with the note of zero pages, so
// that it may say what was learnt while the memory was dumped. Core.Note
// reads it back.
func (w *Writer) AddNote(typ uint32, desc []byte) {
	w.extra = append(w.extra, extraNote{typ, append([]byte(nil), desc...)})
}

// Close writes the note of zero pages and those of AddNote, the program
// headers and the ELF header, and returns what the core holds.
func (w *Writer) Close() (WriteStats, error) {
	sort.Slice(w.placed, func(i, j int) bool { return w.placed[i].Start < w.placed[j].Start })
	segs, err := planSegments(w.ms, w.placed)
	if err != nil {
		return w.st, err
	}
	if 2+len(segs) > maxPhnum {
		// The notes list every mapping anyway: leave out the headers of
		// areas without contents first.
		kept := segs[:0]
		for _, sg := range segs {
			if sg.filesz > 0 {
				kept = append(kept, sg)
			}
		}
		if segs = kept; 2+len(segs) > maxPhnum {
			return w.st, fmt.Errorf("%w: %d dumped areas", ErrTooManySegments, len(segs))
		}
	}
	var zb bytes.Buffer
	appendNote(&zb, noteArenactl, ntZeros, zeroNote(w.zeros))
	for _, n := range w.extra {
		appendNote(&zb, noteArenactl, n.typ, n.desc)
	}
	zoff := w.off
	if _, err := w.w.WriteAt(zb.Bytes(), int64(zoff)); err != nil {
		return w.st, err
	}
	phoff := alignUp(zoff+uint64(zb.Len()), 8)
	ph := make([]byte, phdrSize*(2+len(segs)))
	putPhdr(ph, elf.PT_NOTE, 0, ehdrSize, 0, w.notes, 0, 4)
	putPhdr(ph[phdrSize:], elf.PT_NOTE, 0, zoff, 0, uint64(zb.Len()), 0, 4)
	for i, sg := range segs {
		off := sg.off
		if sg.filesz == 0 {
			// Like the kernel, point areas without contents into the data
			// rather than at the start of the file: gdb's BFD took every
			// such segment at offset 0 for the notes once more, and listed
			// each thread as many times.
			off = alignUp(ehdrSize+w.notes, PageSize)
		}
		putPhdr(ph[phdrSize*(i+2):], elf.PT_LOAD, sg.flags, off, sg.vaddr, sg.filesz, sg.memsz, PageSize)
	}
	if _, err := w.w.WriteAt(ph, int64(phoff)); err != nil {
		return w.st, err
	}
	var eh [ehdrSize]byte
	putEhdr(eh[:], phoff, 2+len(segs))
	if _, err := w.w.WriteAt(eh[:], 0); err != nil {
		return w.st, err
	}
	w.st.Size, w.st.Segments = int64(phoff)+int64(len(ph)), len(segs)
	return w.st, nil
}

// zeroNote is the sorted, merged list of zero ranges as (start, end) pairs.
func zeroNote(zs []maps.Range) []byte {
	sort.Slice(zs, func(i, j int) bool { return zs[i].Start < zs[j].Start })
	d := make([]byte, 0, 16*len(zs))
	for i, z := range zs {
		if i+1 < len(zs) && zs[i+1].Start <= z.End {
			zs[i+1].Start, zs[i+1].End = z.Start, max(z.End, zs[i+1].End)
			continue
		}
		d = endian.AppendUint64(d, z.Start)
		d = endian.AppendUint64(d, z.End)
	}
	return d
}

// Write writes a whole core: s, and the memory of dump read from mem.
func Write(ctx context.Context, w io.WriterAt, s *Snapshot, mem Memory, dump []maps.Range) (WriteStats, error) {
	cw, err := NewWriter(w, s)
	if err != nil {
		return WriteStats{}, err
	}
	if err := cw.Dump(ctx, mem, dump); err != nil {
		return cw.st, err
	}
	return cw.Close()
}

// readPages fills b from addr and returns which pages could not be read
// (nil when all could).
func readPages(mem Memory, b []byte, addr uint64) []bool {
	if n, err := mem.ReadAt(b, addr); err == nil && n == len(b) {
		return nil
	}
	bad := make([]bool, len(b)/PageSize)
	for i := range bad {
		p := b[i*PageSize : (i+1)*PageSize]
		if n, err := mem.ReadAt(p, addr+uint64(i*PageSize)); err != nil || n != len(p) {
			bad[i] = true
		}
	}
	return bad
}

// wseg is one PT_LOAD to write.
type wseg struct {
	vaddr, memsz, off, filesz uint64
	flags                     elf.ProgFlag
}

// planSegments tiles every mapping with PT_LOAD entries: with contents where
// a dumped range covers it, without elsewhere. dumped is sorted.
func planSegments(ms []maps.Mapping, dumped []placed) ([]wseg, error) {
	for i := 1; i < len(dumped); i++ {
		if dumped[i].Start < dumped[i-1].End {
			return nil, fmt.Errorf("dump range %#x-%#x overlaps another", dumped[i].Start, dumped[i].End)
		}
	}
	var segs []wseg
	covered := uint64(0) // bytes of dumped ranges inside some mapping
	j := 0
	for i, m := range ms {
		if m.End <= m.Start {
			continue
		}
		if i > 0 && m.Start < ms[i-1].End {
			return nil, fmt.Errorf("mapping %#x-%#x is out of order", m.Start, m.End)
		}
		fl := progFlags(m.Perms)
		cur := m.Start
		for j < len(dumped) && dumped[j].End <= m.Start {
			j++
		}
		for k := j; k < len(dumped) && dumped[k].Start < m.End; k++ {
			d := dumped[k]
			a, b := max(d.Start, m.Start), min(d.End, m.End)
			if a > cur {
				segs = append(segs, wseg{vaddr: cur, memsz: a - cur, flags: fl})
			}
			segs = append(segs, wseg{vaddr: a, memsz: b - a, off: d.off + (a - d.Start), filesz: b - a, flags: fl})
			covered += b - a
			cur = b
		}
		if cur < m.End {
			segs = append(segs, wseg{vaddr: cur, memsz: m.End - cur, flags: fl})
		}
	}
	total := uint64(0)
	for _, d := range dumped {
		total += d.End - d.Start
	}
	if covered != total {
		return nil, fmt.Errorf("%d bytes of the dumped ranges lie outside every mapping", total-covered)
	}
	return segs, nil
}

func progFlags(perms string) elf.ProgFlag {
	var f elf.ProgFlag
	if strings.HasPrefix(perms, "r") {
		f |= elf.PF_R
	}
	if len(perms) > 1 && perms[1] == 'w' {
		f |= elf.PF_W
	}
	if len(perms) > 2 && perms[2] == 'x' {
		f |= elf.PF_X
	}
	return f
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }

var endian = binary.LittleEndian

func putEhdr(b []byte, phoff uint64, phnum int) {
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	b[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	b[elf.EI_OSABI] = byte(elf.ELFOSABI_NONE)
	endian.PutUint16(b[16:], uint16(elf.ET_CORE))
	endian.PutUint16(b[18:], uint16(elf.EM_X86_64))
	endian.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	endian.PutUint64(b[32:], phoff)
	endian.PutUint16(b[52:], ehdrSize)
	endian.PutUint16(b[54:], phdrSize)
	endian.PutUint16(b[56:], uint16(phnum))
	endian.PutUint16(b[58:], 64) // e_shentsize, though there are no sections
}

func putPhdr(b []byte, typ elf.ProgType, flags elf.ProgFlag, off, vaddr, filesz, memsz, align uint64) {
	endian.PutUint32(b[0:], uint32(typ))
	endian.PutUint32(b[4:], uint32(flags))
	endian.PutUint64(b[8:], off)
	endian.PutUint64(b[16:], vaddr)
	endian.PutUint64(b[24:], 0) // p_paddr
	endian.PutUint64(b[32:], filesz)
	endian.PutUint64(b[40:], memsz)
	endian.PutUint64(b[48:], align)
}

// buildNotes lays the notes out in the kernel's order: the first thread's
// NT_PRSTATUS, the process's NT_PRPSINFO, NT_AUXV and NT_FILE, the first
// thread's FPU state, then each other thread's NT_PRSTATUS and FPU state;
// debuggers attach FPU notes to the NT_PRSTATUS before them. arenactl's
// mapping list comes last.
func buildNotes(s *Snapshot) []byte {
	var b bytes.Buffer
	for i, th := range s.Threads {
		appendNote(&b, "CORE", ntPrstatus, prstatus(s, th))
		if i == 0 {
			appendNote(&b, "CORE", ntPrpsinfo, prpsinfo(s))
			if len(s.Auxv) > 0 {
				appendNote(&b, "CORE", ntAuxv, s.Auxv)
			}
			appendNote(&b, "CORE", ntFile, fileNote(s.Mappings))
		}
		if len(th.XState) >= fxsaveSize {
			appendNote(&b, "CORE", ntPrfpreg, th.XState[:fxsaveSize])
			appendNote(&b, "LINUX", ntX86Xstate, th.XState)
		}
	}
	appendNote(&b, noteArenactl, ntMaps, FormatSmaps(s.Mappings))
	return b.Bytes()
}

func appendNote(b *bytes.Buffer, name string, typ uint32, desc []byte) {
	var h [12]byte
	endian.PutUint32(h[0:], uint32(len(name)+1))
	endian.PutUint32(h[4:], uint32(len(desc)))
	endian.PutUint32(h[8:], typ)
	b.Write(h[:])
	b.WriteString(name)
	b.Write(make([]byte, align4(uint64(len(name)+1))-uint64(len(name))))
	b.Write(desc)
	b.Write(make([]byte, align4(uint64(len(desc)))-uint64(len(desc))))
}

func prstatus(s *Snapshot, th debuggee.Thread) []byte {
	d := make([]byte, prstatusSize)
	endian.PutUint32(d[prstatusPid:], uint32(th.Tid))
	endian.PutUint32(d[prstatusPid+4:], uint32(s.PPid))
	endian.PutUint32(d[prstatusPid+8:], uint32(s.Pgrp))
	endian.PutUint32(d[prstatusPid+12:], uint32(s.Sid))
	for i, r := range th.Regs[:len(arch.AMD64.Prstatus.Words)] {
		endian.PutUint64(d[prstatusRegs+8*i:], r)
	}
	if len(th.XState) >= fxsaveSize {
		endian.PutUint32(d[prstatusFpvalid:], 1)
	}
	return d
}

func prpsinfo(s *Snapshot) []byte {
	d := make([]byte, prpsinfoSize)
	// pr_state is the index of the state letter in the kernel's list;
	// pr_sname the letter itself.
	if i := strings.IndexByte("RSDTZW", s.State); i >= 0 {
		d[0] = byte(i)
	}
	d[1] = s.State
	if s.State == 'Z' {
		d[2] = 1
	}
	endian.PutUint32(d[16:], s.Uid)
	endian.PutUint32(d[20:], s.Gid)
	endian.PutUint32(d[prpsinfoPid:], uint32(s.Pid))
	endian.PutUint32(d[prpsinfoPid+4:], uint32(s.PPid))
	endian.PutUint32(d[prpsinfoPid+8:], uint32(s.Pgrp))
	endian.PutUint32(d[prpsinfoPid+12:], uint32(s.Sid))
	copy(d[prpsinfoName:prpsinfoName+15], s.Command)
	copy(d[prpsinfoArgs:prpsinfoArgs+79], s.Args)
	return d
}

// fileNote is NT_FILE: every file-backed mapping, its page offset, and the
// paths after the table.
func fileNote(ms []maps.Mapping) []byte {
	var files []maps.Mapping
	for _, m := range ms {
		if strings.HasPrefix(m.Path, "/") {
			files = append(files, m)
		}
	}
	d := make([]byte, 16+24*len(files))
	endian.PutUint64(d, uint64(len(files)))
	endian.PutUint64(d[8:], PageSize)
	for i, m := range files {
		e := d[16+24*i:]
		endian.PutUint64(e, m.Start)
		endian.PutUint64(e[8:], m.End)
		endian.PutUint64(e[16:], m.Offset/PageSize)
	}
	for _, m := range files {
		d = append(d, m.Path...)
		d = append(d, 0)
	}
	return d
}

// FormatSmaps prints mappings as /proc/PID/smaps does (the counters
// maps.ParseSmaps reads back), so that a core can carry the process's own
// mapping list.
func FormatSmaps(ms []maps.Mapping) []byte {
	var b bytes.Buffer
	for _, m := range ms {
		dev := m.Dev
		if dev == "" {
			dev = "00:00"
		}
		fmt.Fprintf(&b, "%x-%x %s %08x %s %d", m.Start, m.End, m.Perms, m.Offset, dev, m.Inode)
		if m.Path != "" {
			b.WriteString(" " + m.Path)
		}
		b.WriteByte('\n')
		for _, f := range []struct {
			key string
			v   uint64
		}{{"Rss", m.Rss}, {"Pss", m.Pss}, {"Shared_Clean", m.SharedClean}, {"Shared_Dirty", m.SharedDirty},
			{"Private_Clean", m.PrivateClean}, {"Private_Dirty", m.PrivateDirty}, {"Anonymous", m.Anonymous},
			{"AnonHugePages", m.AnonHugePages}, {"Swap", m.Swap}} {
			fmt.Fprintf(&b, "%s: %d kB\n", f.key, f.v/1024)
		}
	}
	return b.Bytes()
}
