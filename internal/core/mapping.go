package core

import (
	"debug/elf"
	"sort"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
)

// brkRandom is how far above the executable the kernel may start the brk
// heap on x86_64 (arch_randomize_brk: 32 MiB).
const brkRandom = 32 << 20

// mappings rebuilds a /proc/PID/maps-like list from the PT_LOAD segments
// (one per memory area of the process) and NT_FILE, naming what a kernel
// core does not name: [heap], [stack] and [vdso].
func (c *Core) mappings() []maps.Mapping {
	files := append([]FileMapping(nil), c.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Start < files[j].Start })
	var ms []maps.Mapping
	for _, s := range c.segs {
		m := maps.Mapping{Start: s.Vaddr, End: s.Vaddr + s.Memsz, Perms: perms(s.Flags)}
		i := sort.Search(len(files), func(i int) bool { return files[i].End > s.Vaddr })
		if i < len(files) && files[i].Start <= s.Vaddr {
			m.Path = files[i].Path
			m.Offset = files[i].Offset + (s.Vaddr - files[i].Start)
		}
		ms = append(ms, m)
	}
	exeEnd := uint64(0)
	if exe := c.Exe(); exe != "" {
		for _, m := range ms {
			if m.Path == exe && m.End > exeEnd {
				exeEnd = m.End
			}
		}
	}
	vdso := c.Auxv[atSysinfoEhdr]
	main := c.mainThread()
	heapNamed := false
	for i := range ms {
		m := &ms[i]
		switch {
		case m.Path != "":
		case vdso != 0 && m.Start == vdso:
			m.Path = "[vdso]"
		case main != nil && m.Contains(main.SPOf(c.Arch)):
			m.Path = "[stack]"
		case !heapNamed && exeEnd != 0 && m.Start >= exeEnd && m.Start <= exeEnd+brkRandom && m.Writable():
			m.Path, heapNamed = "[heap]", true
		}
	}
	return ms
}

func perms(f elf.ProgFlag) string {
	b := []byte("---p")
	if f&elf.PF_R != 0 {
		b[0] = 'r'
	}
	if f&elf.PF_W != 0 {
		b[1] = 'w'
	}
	if f&elf.PF_X != 0 {
		b[2] = 'x'
	}
	return string(b)
}

// Exe is the path of the dumped program: the file that holds its program
// headers (AT_PHDR) or entry point.
func (c *Core) Exe() string {
	for _, key := range []uint64{atPhdr, atEntry} {
		a, ok := c.Auxv[key]
		if !ok {
			continue
		}
		for _, f := range c.Files {
			if a >= f.Start && a < f.End {
				return f.Path
			}
		}
	}
	return ""
}

// mainThread is the thread whose id is the process id.
func (c *Core) mainThread() *debuggee.Thread {
	for i := range c.Threads {
		if c.Threads[i].Tid == c.Pid {
			return &c.Threads[i]
		}
	}
	return nil
}

// StackPointers maps each thread to its stack pointer, for maps.Classify.
func (c *Core) StackPointers() map[int]uint64 {
	sps := map[int]uint64{}
	for _, t := range c.Threads {
		sps[t.Tid] = t.SPOf(c.Arch)
	}
	return sps
}
