package core

import (
	"bytes"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
)

// Note types the kernel writes into a core (linux/elf.h).
const (
	ntPrstatus = 1
	ntPrpsinfo = 3
	ntAuxv     = 6
	ntFile     = 0x46494c45
	ntSiginfo  = 0x53494749
)

// Offsets inside struct elf_prstatus (the writer's, x86_64: the reader
// takes the core's machine's, arch.Arch.Prstatus) and elf_prpsinfo (the
// same on x86_64 and aarch64).
const (
	prstatusPid  = 32
	prstatusRegs = 112 // pr_reg, a user_regs_struct of 27 words
	prpsinfoPid  = 24
	prpsinfoName = 40
)

// maxThreads and maxMappings bound what a core's notes can make arenactl
// hold: each NT_PRSTATUS becomes a thread, each NT_FILE entry or mapping of
// a snapshot's list a mapping, and a crafted core of a few MB (or a .zst
// of 90 KB) once claimed 3 million threads and took 3.5 GB. A real process
// stays far below: Linux refuses a process more mappings than
// vm.max_map_count (65,530 by default; 262,144 where raised for
// databases), and one with more than 131,072 threads is not one arenactl
// could stop or walk in any useful time. README says these limits.
const (
	maxThreads  = 1 << 17
	maxMappings = 1 << 18
)

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// notes decodes the PT_NOTE segment b.
func (c *Core) notes(b []byte) error {
	for len(b) >= 12 {
		namesz, descsz, typ := uint64(le32(b)), uint64(le32(b[4:])), le32(b[8:])
		nameEnd := 12 + align4(namesz)
		descEnd := nameEnd + align4(descsz)
		if descEnd > uint64(len(b)) || nameEnd+descsz > uint64(len(b)) {
			return c.bad("truncated note (type %#x)", typ)
		}
		name := string(bytes.TrimRight(b[12:12+namesz], "\x00"))
		desc := b[nameEnd : nameEnd+descsz]
		b = b[descEnd:]
		if name == noteArenactl {
			if err := c.arenactlNote(typ, desc); err != nil {
				return err
			}
			continue
		}
		if name != "CORE" && name != "LINUX" {
			continue
		}
		switch typ {
		case ntPrstatus:
			if len(c.Threads) == maxThreads {
				return c.bad("more than %d threads (NT_PRSTATUS notes): more than arenactl reads of one process", maxThreads)
			}
			lay := c.Arch.Prstatus
			if len(desc) < lay.RegsOff+len(lay.Words)*8 {
				return c.bad("NT_PRSTATUS of %d bytes is too short", len(desc))
			}
			th := debuggee.Thread{Tid: int(le32(desc[lay.PidOff:])), Arch: c.Arch}
			for i := range lay.Words {
				th.Regs[i] = le64(desc[lay.RegsOff+8*i:])
			}
			c.Threads = append(c.Threads, th)
		case uint32(c.Arch.TLSNote):
			// aarch64's thread pointer (tpidr_el0), in a note of its own
			// after its thread's NT_PRSTATUS (fs/binfmt_elf.c writes a
			// thread's notes together, NT_PRSTATUS first).
			if c.Arch.TLSNote != 0 && len(c.Threads) > 0 && len(desc) >= 8 {
				c.Threads[len(c.Threads)-1].Regs[c.Arch.Words.TP] = le64(desc)
			}
		case ntPrpsinfo:
			if len(desc) >= prpsinfoName+16 {
				c.Pid = int(le32(desc[prpsinfoPid:]))
				c.Command = string(bytes.TrimRight(desc[prpsinfoName:prpsinfoName+16], "\x00"))
			}
		case ntAuxv:
			c.Auxv = map[uint64]uint64{}
			for i := 0; i+16 <= len(desc); i += 16 {
				c.Auxv[le64(desc[i:])] = le64(desc[i+8:])
			}
		case ntSiginfo:
			if len(desc) >= 24 {
				c.Signal = &Signal{Signo: int32(le32(desc)), Code: int32(le32(desc[8:])), Addr: le64(desc[16:])}
			}
		case ntFile:
			if err := c.fileNote(desc); err != nil {
				return err
			}
		}
	}
	return nil
}

// arenactlNote decodes the notes of arenactl's snapshots (see Writer): the
// process's mapping list, and the memory that reads as zeros.
func (c *Core) arenactlNote(typ uint32, desc []byte) error {
	switch typ {
	case ntMaps:
		// A mapping's header starts with its hex address; its fields
		// with a capital letter. Counted before anything is parsed.
		n := 0
		for line := range bytes.Lines(desc) {
			if b := line[0]; '0' <= b && b <= '9' || 'a' <= b && b <= 'f' {
				n++
			}
		}
		if n > maxMappings {
			return c.bad("arenactl's mapping list has %d mappings: more than %d, which no process has", n, maxMappings)
		}
		ms, err := maps.ParseSmaps(bytes.NewReader(desc))
		if err != nil {
			return c.bad("arenactl's mapping list: %v", err)
		}
		c.ownMaps = ms
	case ntZeros:
		for i := 0; i+16 <= len(desc); i += 16 {
			z := maps.Range{Start: le64(desc[i:]), End: le64(desc[i+8:])}
			if z.End <= z.Start || len(c.zeros) > 0 && z.Start < c.zeros[len(c.zeros)-1].End {
				return c.bad("arenactl's zero ranges are not sorted")
			}
			c.zeros = append(c.zeros, z)
		}
	default:
		// Kept for whoever knows the type (NoteAllocator is glibc's);
		// copied, since the file is unmapped on Close.
		if c.extra == nil {
			c.extra = map[uint32][]byte{}
		}
		c.extra[typ] = append([]byte(nil), desc...)
	}
	return nil
}

// fileNote decodes NT_FILE: count, page size, count (start, end, page
// offset) triples, then count NUL-terminated paths.
func (c *Core) fileNote(d []byte) error {
	if len(d) < 16 {
		return c.bad("NT_FILE too short")
	}
	n, page := le64(d), le64(d[8:])
	if n > (uint64(len(d))-16)/24 { // the triples follow the two words
		return c.bad("NT_FILE claims %d files", n)
	}
	if n > maxMappings || uint64(len(c.Files))+n > maxMappings {
		return c.bad("NT_FILE lists %d mapped files: more than %d, which no process has", uint64(len(c.Files))+n, maxMappings)
	}
	names := bytes.Split(d[16+24*n:], []byte{0})
	if uint64(len(names)) < n {
		return c.bad("NT_FILE has %d names for %d files", len(names), n)
	}
	for i := uint64(0); i < n; i++ {
		e := d[16+24*i:]
		c.Files = append(c.Files, FileMapping{Start: le64(e), End: le64(e[8:]), Offset: le64(e[16:]) * page, Path: string(names[i])})
	}
	return nil
}

// Auxiliary vector keys arenactl uses.
const (
	atPhdr        = 3
	atPagesz      = 6
	atEntry       = 9
	atSysinfoEhdr = 33
)
