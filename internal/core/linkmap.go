package core

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"sort"
)

// Auxiliary vector keys and dynamic tags the link_map walk uses (elf.h).
const (
	atPhent  = 4
	atPhnum  = 5
	atBase   = 7
	atExecfn = 31
	dtDebug  = 21
)

// Bounds of the walk: a crafted core must not make it loop or allocate.
const (
	maxDynamic = 4096 // entries of the executable's .dynamic read
	maxName    = 4096 // PATH_MAX
)

// linkMapFiles finds the files a core's process had mapped when the core
// has no NT_FILE note (gdb's gcore before 8.0 wrote none, nor do some other
// dumpers), as gdb and chap do: the executable's program headers (AT_PHDR)
// give its PT_DYNAMIC, whose DT_DEBUG entry ld.so points at its r_debug
// (glibc elf/rtld.c, elf/link.h); r_debug.r_map starts the list of
// link_maps, each with an object's load bias (l_addr), name (l_name) and
// dynamic section (l_ld). Each object's PT_LOAD headers, read from its ELF
// header in the core (the kernel dumps the first page of every ELF file
// mapping) or else from the file (open), give the ranges it mapped. The
// executable's own name is AT_EXECFN's string, on the dumped stack. A
// static executable has no list: only its own ranges are found. Nothing is
// trusted: every address read is bounded, and the list's length too.
func (c *Core) linkMapFiles(open func(string) (*os.File, error)) []FileMapping {
	exe := c.cString(c.Auxv[atExecfn])
	var out []FileMapping
	rdebug := uint64(0)
	exeDone := false
	if progs, bias, ok := c.exeProgs(exe, open); ok {
		if exe != "" {
			out = append(out, loadRanges(exe, bias, progs)...)
			exeDone = true
		}
		rdebug = c.dtDebug(bias, progs)
		if rdebug == 0 {
			// No DT_DEBUG to follow: a program started by naming ld.so
			// (ld.so PROG), whose own dynamic section has none, or one
			// built without it. ld.so's r_debug is then found by its
			// contents.
			rdebug = c.findRDebug(bias, progs)
		}
	}
	if base := c.Auxv[atBase]; rdebug == 0 && base != 0 {
		if ps, ok := c.objectProgs(base, "", nil); ok {
			rdebug = c.findRDebug(base, ps)
		} else {
			// gdb's gcore before 8.0 dumps no read-only file page, so
			// not even the ELF headers: r_debug is looked for in the
			// writable memory just above ld.so's base.
			rdebug = c.scanRDebug(base)
		}
	}
	if phdr := c.Auxv[atPhdr]; rdebug == 0 && c.Auxv[atBase] == 0 && phdr >= 64 {
		// ld.so run as the program (ld.so PROG): it is the executable,
		// its headers right after its ELF header at its base.
		rdebug = c.scanRDebug(phdr - 64)
	}
	if rdebug == 0 {
		return sortFiles(out)
	}
	var w [8]byte
	if _, err := c.ReadAt(w[:], rdebug+8); err != nil { // r_debug.r_map
		return sortFiles(out)
	}
	seen := map[uint64]bool{}
	first := true
	for lm := le64(w[:]); lm != 0 && !seen[lm] && len(seen) < maxMappings; first = false {
		seen[lm] = true
		var b [32]byte // l_addr, l_name, l_ld, l_next
		if _, err := c.ReadAt(b[:], lm); err != nil {
			break
		}
		lAddr, name, lLd, next := le64(b[0:]), c.cString(le64(b[8:])), le64(b[16:]), le64(b[24:])
		lm = next
		start := lAddr
		if first && name == "" {
			// The executable's own entry, first in the list, has no
			// name: AT_EXECFN's, where its program headers are.
			if exeDone {
				continue
			}
			name, start = exe, c.Auxv[atPhdr]
		}
		// The vDSO's name is not a path: not a file to find.
		if len(name) == 0 || name[0] != '/' {
			continue
		}
		if ps, ok := c.objectProgs(lAddr, name, open); ok {
			out = append(out, loadRanges(name, lAddr, ps)...)
		} else if ps, ok := c.prelinkedProgs(lAddr, lLd); ok {
			out = append(out, loadRanges(name, lAddr, ps)...)
		} else {
			out = append(out, c.segmentRun(name, start, lLd)...)
		}
	}
	return sortFiles(out)
}

func sortFiles(fs []FileMapping) []FileMapping {
	sort.Slice(fs, func(i, j int) bool { return fs[i].Start < fs[j].Start })
	return fs
}

// exeProgs reads the executable's program headers (AT_PHDR, in the core,
// else in its file exe) and its load bias: where its PT_PHDR landed, or
// its headers right after the ELF header in its first PT_LOAD.
func (c *Core) exeProgs(exe string, open func(string) (*os.File, error)) ([]elf.ProgHeader, uint64, bool) {
	phdr, phnum := c.Auxv[atPhdr], c.Auxv[atPhnum]
	if phdr == 0 || phnum == 0 || phnum > 0xffff || c.Auxv[atPhent] != 56 {
		return nil, 0, false
	}
	progs, ok := c.progsAt(phdr, int(phnum))
	if !ok && exe != "" && open != nil {
		progs, ok = fileProgs(exe, open)
	}
	if !ok {
		return nil, 0, false
	}
	for _, p := range progs {
		if p.Type == elf.PT_PHDR {
			return progs, phdr - p.Vaddr, true
		}
	}
	for _, p := range progs {
		if p.Type == elf.PT_LOAD && p.Off == 0 {
			return progs, phdr - 64 - p.Vaddr, true
		}
	}
	return nil, 0, false
}

// dtDebug is the value of DT_DEBUG in the dynamic section of the object
// loaded at bias with program headers ps: ld.so's r_debug, or 0.
func (c *Core) dtDebug(bias uint64, ps []elf.ProgHeader) uint64 {
	for _, p := range ps {
		if p.Type != elf.PT_DYNAMIC {
			continue
		}
		n := min(p.Memsz/16, maxDynamic)
		b := make([]byte, 16*n)
		got, _ := c.ReadAt(b, bias+p.Vaddr)
		for i := 0; i+16 <= got; i += 16 {
			tag := le64(b[i:])
			if tag == 0 {
				break
			}
			if tag == dtDebug {
				return le64(b[i+8:])
			}
		}
	}
	return 0
}

// ldsoSpan bounds how far above ld.so's base its data (and r_debug) is
// looked for when its headers are not in the core: ld.so is a few hundred
// KiB.
const ldsoSpan = 4 << 20

// scanRDebug looks for ld.so's r_debug (as findRDebug) in the core's
// writable segments within ldsoSpan above base, r_brk in any executable
// one.
func (c *Core) scanRDebug(base uint64) uint64 {
	var ps []elf.ProgHeader
	for _, s := range c.segs {
		if s.Vaddr >= base && s.Vaddr < base+ldsoSpan {
			ps = append(ps, elf.ProgHeader{Type: elf.PT_LOAD, Flags: s.Flags, Vaddr: s.Vaddr - base, Memsz: min(s.Memsz, s.Filesz)})
		}
	}
	for _, s := range c.segs {
		if s.Flags&elf.PF_X != 0 {
			ps = append(ps, elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_X, Vaddr: s.Vaddr - base, Memsz: s.Memsz})
		}
	}
	return c.findRDebug(base, ps)
}

// segmentRun names path the core's segments an object mapped when its
// program headers are nowhere to read: from the one that holds start (its
// first page) to the one that holds its dynamic section (ld, in its data),
// all contiguous, then up to two writable ones right after (the rest of
// its data and its bss). Offsets in the file are unknown: only the core's
// memory is read for them.
func (c *Core) segmentRun(path string, start, ld uint64) []FileMapping {
	at := func(a uint64) int {
		i := sort.Search(len(c.segs), func(i int) bool { return c.segs[i].Vaddr+c.segs[i].Memsz > a })
		if i < len(c.segs) && c.segs[i].Vaddr <= a {
			return i
		}
		return -1
	}
	i, j := at(start), at(ld)
	if i < 0 || j < i || c.segs[j].Vaddr+c.segs[j].Memsz-c.segs[i].Vaddr > 1<<30 {
		return nil
	}
	for k := i + 1; k <= j; k++ {
		if c.segs[k].Vaddr != c.segs[k-1].Vaddr+c.segs[k-1].Memsz {
			return nil
		}
	}
	for n := 0; n < 2 && j+1 < len(c.segs); n++ {
		s := c.segs[j+1]
		if s.Vaddr != c.segs[j].Vaddr+c.segs[j].Memsz || s.Flags&elf.PF_W == 0 || s.Memsz > 1<<20 {
			break
		}
		j++
	}
	var out []FileMapping
	for k := i; k <= j; k++ {
		out = append(out, FileMapping{Start: c.segs[k].Vaddr, End: c.segs[k].Vaddr + c.segs[k].Memsz, Path: path})
	}
	return out
}

// maxRDebugScan bounds the bytes of ld.so's data searched for r_debug.
const maxRDebugScan = 1 << 20

// findRDebug looks in the writable data of ld.so, loaded at base with
// program headers ps, for its r_debug (glibc elf/link.h): r_version 1 (2
// from glibc 2.35, r_debug_extended), r_map a pointer, r_brk an address in
// ld.so's own code (_dl_debug_state), r_state RT_CONSISTENT, RT_ADD or
// RT_DELETE, and r_ldbase ld.so's base. 0 when no word fits.
func (c *Core) findRDebug(base uint64, ps []elf.ProgHeader) uint64 {
	inText := func(a uint64) bool {
		for _, p := range ps {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && a >= base+p.Vaddr && a < base+p.Vaddr+p.Memsz {
				return true
			}
		}
		return false
	}
	scanned := uint64(0)
	for _, p := range ps {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_W == 0 || scanned >= maxRDebugScan {
			continue
		}
		n := min(p.Memsz, maxRDebugScan-scanned) &^ 7
		scanned += n
		b := make([]byte, n)
		got, _ := c.ReadAt(b, base+p.Vaddr)
		for i := 0; i+40 <= got; i += 8 {
			version, rmap, brk, state, ldbase := le64(b[i:])&0xffffffff, le64(b[i+8:]), le64(b[i+16:]), le64(b[i+24:])&0xffffffff, le64(b[i+32:])
			if (version == 1 || version == 2) && rmap != 0 && state <= 2 && ldbase == base && inText(brk) {
				return base + p.Vaddr + uint64(i)
			}
		}
	}
	return 0
}

// objectProgs reads a loaded object's program headers: from its ELF header
// in the core, at its load bias (where a shared object's first PT_LOAD,
// at address 0, starts), or else from its file.
func (c *Core) objectProgs(bias uint64, name string, open func(string) (*os.File, error)) ([]elf.ProgHeader, bool) {
	var eh [64]byte
	if _, err := c.ReadAt(eh[:], bias); err == nil && bytes.Equal(eh[:4], []byte(elf.ELFMAG)) &&
		binary.LittleEndian.Uint16(eh[54:]) == 56 {
		if ps, ok := c.progsAt(bias+le64(eh[32:]), int(binary.LittleEndian.Uint16(eh[56:]))); ok {
			return ps, true
		}
	}
	if open == nil {
		return nil, false
	}
	return fileProgs(name, open)
}

// prelinkedProgs reads the program headers of an object whose ELF header
// is not at its load bias: one prelinked (or linked) to load at a fixed
// address, whose link_map has l_addr 0 (as Red Hat's libraries once were,
// at 0x30e0000000 and up). Its header is at the start of the core segment
// that holds its first page, below its dynamic section (l_ld); one is
// taken only when its PT_DYNAMIC, at bias, is l_ld, and its first PT_LOAD
// is that segment.
func (c *Core) prelinkedProgs(bias, ld uint64) ([]elf.ProgHeader, bool) {
	i := sort.Search(len(c.segs), func(i int) bool { return c.segs[i].Vaddr > ld }) - 1
	for n := 0; i >= 0 && n < 64 && ld-c.segs[i].Vaddr < 1<<30; i, n = i-1, n+1 {
		start := c.segs[i].Vaddr
		var eh [64]byte
		if _, err := c.ReadAt(eh[:], start); err != nil || !bytes.Equal(eh[:4], []byte(elf.ELFMAG)) ||
			binary.LittleEndian.Uint16(eh[54:]) != 56 || le64(eh[32:]) > PageSize {
			continue
		}
		ps, ok := c.progsAt(start+le64(eh[32:]), int(min(binary.LittleEndian.Uint16(eh[56:]), 256)))
		if !ok {
			continue
		}
		first, dyn := false, false
		for _, p := range ps {
			first = first || p.Type == elf.PT_LOAD && p.Off == 0 && bias+p.Vaddr == start
			dyn = dyn || p.Type == elf.PT_DYNAMIC && bias+p.Vaddr == ld
		}
		if first && dyn {
			return ps, true
		}
	}
	return nil, false
}

// fileProgs reads the program headers of the ELF file at name.
func fileProgs(name string, open func(string) (*os.File, error)) ([]elf.ProgHeader, bool) {
	f, err := open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, false
	}
	var ps []elf.ProgHeader
	for _, p := range ef.Progs {
		ps = append(ps, p.ProgHeader)
	}
	return ps, true
}

// progsAt reads n program headers from the core's memory at addr.
func (c *Core) progsAt(addr uint64, n int) ([]elf.ProgHeader, bool) {
	b := make([]byte, 56*n)
	if _, err := c.ReadAt(b, addr); err != nil {
		return nil, false
	}
	ps := make([]elf.ProgHeader, n)
	for i := range ps {
		h := b[56*i:]
		ps[i] = elf.ProgHeader{Type: elf.ProgType(le32(h)), Flags: elf.ProgFlag(le32(h[4:])), Off: le64(h[8:]), Vaddr: le64(h[16:]),
			Paddr: le64(h[24:]), Filesz: le64(h[32:]), Memsz: le64(h[40:]), Align: le64(h[48:])}
	}
	return ps, true
}

// loadRanges are the file-backed ranges an object's PT_LOAD headers map
// at bias, as NT_FILE would list them: from the page of p_vaddr to the page
// end of its file contents (what lies past them is anonymous bss).
func loadRanges(path string, bias uint64, ps []elf.ProgHeader) []FileMapping {
	var out []FileMapping
	for _, p := range ps {
		if p.Type != elf.PT_LOAD || p.Filesz == 0 || p.Vaddr+p.Filesz < p.Vaddr {
			continue
		}
		start := bias + p.Vaddr&^(PageSize-1)
		end := bias + (p.Vaddr+p.Filesz+PageSize-1)&^(PageSize-1)
		if end <= start {
			continue
		}
		out = append(out, FileMapping{Start: start, End: end, Offset: p.Off &^ (PageSize - 1), Path: path})
	}
	return out
}

// cString reads a NUL-terminated string of at most maxName bytes from
// the core's memory; "" when there is none.
func (c *Core) cString(addr uint64) string {
	if addr == 0 {
		return ""
	}
	var out []byte
	var b [256]byte
	for len(out) < maxName {
		n, _ := c.ReadAt(b[:], addr+uint64(len(out)))
		if n == 0 {
			return ""
		}
		if i := bytes.IndexByte(b[:n], 0); i >= 0 {
			return string(append(out, b[:i]...))
		}
		out = append(out, b[:n]...)
	}
	return ""
}
