package core

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/arenactl/arenactl/internal/arch"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/maps"
)

// Core is an opened core file.
type Core struct {
	Path    string
	Pid     int               // from NT_PRPSINFO
	Command string            // its short name, from NT_PRPSINFO
	Threads []debuggee.Thread // in note order: the thread that received the signal first
	Signal  *Signal           // from NT_SIGINFO; nil when the core has none (gcore)
	Auxv    map[uint64]uint64
	Arch    *arch.Arch    // from the ELF header
	Files   []FileMapping // NT_FILE: which file backs which range
	// FilesFromLinkMap: the core has no NT_FILE, and Files were found
	// through the dynamic linker's list in its memory (linkMapFiles).
	FilesFromLinkMap bool
	Mappings         []maps.Mapping

	segs    []segment
	ownMaps []maps.Mapping    // an arenactl snapshot's own copy of /proc/PID/smaps
	zeros   []maps.Range      // an arenactl snapshot's memory that reads as zeros
	extra   map[uint32][]byte // arenactl notes of other types, by type
	data    []byte            // the mapped file (or OpenBytes's bytes)
	mapped  bool              // data is a mapping of file, to unmap
	file    *os.File
}

// segment is one PT_LOAD: memory [Vaddr, Vaddr+Memsz), of which the first
// Filesz bytes are in the file at Off; the rest was not dumped.
type segment struct {
	Vaddr, Memsz, Off, Filesz uint64
	Flags                     elf.ProgFlag
}

// FileMapping is one entry of NT_FILE.
type FileMapping struct {
	Start, End, Offset uint64
	Path               string
}

// Signal is the signal that made the kernel write the core.
type Signal struct {
	Signo, Code int32
	Addr        uint64 // si_addr for faults
}

// Error is a file that is not a usable x86_64 core.
type Error struct {
	Path string
	What string
}

func (e *Error) Error() string { return e.Path + ": " + e.What }

func (e *Error) Is(target error) bool { return target == errkind.ErrBadCore }

// ErrNotInCore: the address is mapped but its contents were not dumped
// (a PROT_NONE reservation, file text the kernel left out, a hole).
var ErrNotInCore = errors.New("not in the core")

// Open maps a core file, with the default Options.
func Open(path string) (*Core, error) {
	return OpenContext(context.Background(), path, Options{})
}

// OpenContext maps a core file. A compressed one is first unpacked to a
// temporary file that no name links to (see Options); cancelling ctx
// stops the unpacking.
func OpenContext(ctx context.Context, path string, opt Options) (*Core, error) {
	// Only a regular file: a FIFO would block the open, a device give
	// endless bytes or none, a directory nothing to read.
	f, err := hostfs.OpenRegular(path)
	if nr := (*hostfs.NotRegularError)(nil); errors.As(err, &nr) {
		return nil, &Error{Path: path, What: strings.TrimPrefix(nr.Error(), path+": ")}
	}
	if err != nil {
		return nil, err
	}
	c := &Core{Path: path}
	if f, err = c.unpack(ctx, f, opt); err != nil {
		return nil, err
	}
	c.file = f
	if err := c.load(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close unmaps the file (and so frees an unpacked copy's space).
func (c *Core) Close() error {
	if c.mapped {
		unix.Munmap(c.data)
		c.mapped = false
	}
	c.data = nil
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
	return nil
}

// identify checks the start of an ELF file (its magic already seen) for
// an x86_64 core; it says what else it is, or "".
func identify(hdr []byte) string {
	if len(hdr) < 20 {
		return "truncated: the ELF header is cut off"
	}
	typ, machine := elf.Type(binary.LittleEndian.Uint16(hdr[16:])), elf.Machine(binary.LittleEndian.Uint16(hdr[18:]))
	if hdr[elf.EI_DATA] == byte(elf.ELFDATA2MSB) {
		typ, machine = elf.Type(binary.BigEndian.Uint16(hdr[16:])), elf.Machine(binary.BigEndian.Uint16(hdr[18:]))
	}
	if typ != elf.ET_CORE {
		return fmt.Sprintf("an ELF file of type %s, not a core file", typ)
	}
	if _, err := arch.ForELF(elf.Class(hdr[elf.EI_CLASS]), machine); err != nil || hdr[elf.EI_DATA] != byte(elf.ELFDATA2LSB) {
		return fmt.Sprintf("a core of another architecture (%s, %s); arenactl reads x86_64 and aarch64 cores", machine, elf.Class(hdr[elf.EI_CLASS]))
	}
	return ""
}

func (c *Core) bad(format string, args ...any) error {
	return &Error{Path: c.Path, What: fmt.Sprintf(format, args...)}
}

func (c *Core) load() error {
	st, err := c.file.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return c.bad("empty file")
	}
	c.data, err = unix.Mmap(int(c.file.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("%s: mapping the file: %w", c.Path, err)
	}
	c.mapped = true
	return c.parse()
}

// OpenBytes reads a core held in memory (b, named path in messages); b
// must stay unchanged while the Core is used. For tests and fuzzing: no
// file, no unpacking.
func OpenBytes(path string, b []byte) (*Core, error) {
	c := &Core{Path: path, data: b}
	if len(b) == 0 {
		return nil, c.bad("empty file")
	}
	if err := c.parse(); err != nil {
		return nil, err
	}
	return c, nil
}

// parse reads the core in c.data.
func (c *Core) parse() error {
	// The identification and type come from the fixed header, so that a
	// cut-off executable or a foreign core is named as such rather than
	// failing somewhere in its tables.
	hdr := c.data[:min(len(c.data), 20)]
	if len(hdr) < 4 || !bytes.Equal(hdr[:4], []byte(elf.ELFMAG)) {
		return c.bad("not an ELF file")
	}
	if what := identify(hdr); what != "" {
		return c.bad("%s", what)
	}
	c.Arch, _ = arch.ForELF(elf.Class(hdr[elf.EI_CLASS]), elf.Machine(binary.LittleEndian.Uint16(hdr[18:])))
	ef, err := elf.NewFile(bytes.NewReader(c.data))
	if err != nil {
		return c.bad("truncated or damaged ELF headers: %v", err)
	}
	defer ef.Close()
	// The kernel writes one PT_LOAD per mapping (binfmt_elf.c), a few
	// headers more; see maxMappings.
	if len(ef.Progs) > maxMappings+16 {
		return c.bad("%d program headers: more than the %d mappings arenactl reads of one process", len(ef.Progs), maxMappings)
	}
	size := uint64(len(c.data))
	for i, p := range ef.Progs {
		switch p.Type {
		case elf.PT_LOAD:
			if p.Filesz > size || p.Off > size-p.Filesz {
				return c.bad("truncated: segment %d at %#x needs the file up to byte %d, the file has %d", i, p.Vaddr, p.Off+p.Filesz, size)
			}
			c.segs = append(c.segs, segment{Vaddr: p.Vaddr, Memsz: p.Memsz, Off: p.Off, Filesz: p.Filesz, Flags: p.Flags})
		case elf.PT_NOTE:
			if p.Filesz > size || p.Off > size-p.Filesz {
				return c.bad("truncated: the notes need the file up to byte %d, the file has %d", p.Off+p.Filesz, size)
			}
			if err := c.notes(c.data[p.Off : p.Off+p.Filesz]); err != nil {
				return err
			}
		}
	}
	if len(c.segs) == 0 {
		return c.bad("a core without memory (no PT_LOAD)")
	}
	if len(c.Threads) == 0 {
		return c.bad("a core without threads (no NT_PRSTATUS)")
	}
	sort.Slice(c.segs, func(i, j int) bool { return c.segs[i].Vaddr < c.segs[j].Vaddr })
	// Memory sizes are not bounded by the file: a segment that wraps
	// around the address space, or runs into the next, is no process's.
	for i, s := range c.segs {
		if s.Vaddr+s.Memsz < s.Vaddr {
			return c.bad("a segment at %#x claims %#x bytes, past the end of the address space", s.Vaddr, s.Memsz)
		}
		if i > 0 && c.segs[i-1].Vaddr+c.segs[i-1].Memsz > s.Vaddr {
			return c.bad("segments at %#x (%#x bytes) and %#x overlap", c.segs[i-1].Vaddr, c.segs[i-1].Memsz, s.Vaddr)
		}
	}
	c.Mappings = c.ownMaps
	if c.Mappings == nil {
		c.Mappings = c.mappings()
	}
	return nil
}

// Measured reports whether the core records the process's smaps counters
// (RSS, Private_Dirty, Swap, ...): an arenactl snapshot does, in its own
// mapping list; a kernel core or gcore's records sizes only.
func (c *Core) Measured() bool { return c.ownMaps != nil }

// Note returns the descriptor of the arenactl note of type typ (see
// Writer.AddNote), nil when the core has none.
func (c *Core) Note(typ uint32) []byte { return c.extra[typ] }

// ReadAt reads memory of the dumped process. Bytes the core does not hold
// give ErrNotInCore (wrapped with the address); those an arenactl snapshot
// lists as zeros read as zeros.
//
// A mapped file's bytes are read with pread, not copied from the mapping:
// pages of the mapping, once touched, stay in arenactl's RSS until let go,
// and letting them go (madvise) while a walk's workers read the core makes
// every worker fault them in again and interrupts the others' CPUs to flush
// their TLBs. A 1 GiB core's info took 1.07 s that way at one worker and
// 0.9 s at two, and 0.63 s and 0.48 s with pread (2-CPU dev machine).
func (c *Core) ReadAt(p []byte, addr uint64) (int, error) {
	n := 0
	for n < len(p) {
		a := addr + uint64(n)
		i := sort.Search(len(c.segs), func(i int) bool { return c.segs[i].Vaddr+c.segs[i].Memsz > a })
		mapped := i < len(c.segs) && c.segs[i].Vaddr <= a
		if mapped && a-c.segs[i].Vaddr < c.segs[i].Filesz {
			s := c.segs[i]
			if c.mapped {
				m := min(uint64(len(p)-n), s.Filesz-(a-s.Vaddr))
				got, err := c.file.ReadAt(p[n:n+int(m)], int64(s.Off+a-s.Vaddr))
				n += got
				if err != nil {
					return n, fmt.Errorf("reading %#x: %w (%v)", a, ErrNotInCore, err)
				}
				continue
			}
			n += copy(p[n:], c.data[s.Off+a-s.Vaddr:s.Off+s.Filesz])
			continue
		}
		if z := sort.Search(len(c.zeros), func(j int) bool { return c.zeros[j].End > a }); z < len(c.zeros) && c.zeros[z].Start <= a {
			m := min(uint64(len(p)-n), c.zeros[z].End-a)
			clear(p[n : n+int(m)])
			n += int(m)
			continue
		}
		if !mapped {
			return n, fmt.Errorf("reading %#x: %w (unmapped)", a, ErrNotInCore)
		}
		return n, fmt.Errorf("reading %#x: %w", a, ErrNotInCore)
	}
	return n, nil
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
