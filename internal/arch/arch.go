package arch

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"runtime"

	"github.com/arenactl/arenactl/internal/errkind"
)

// Arch is one machine's facts. The values are AMD64 and ARM64; compare
// them by pointer.
type Arch struct {
	// Name is Go's name for the architecture (GOARCH).
	Name string
	// ELFName is what a user reads in a message ("x86_64", "aarch64").
	ELFName string
	// Machine is the ELF header's e_machine for it.
	Machine elf.Machine
	// PtrSize is the size of a pointer and of a register, in bytes.
	PtrSize int
	// PageSize is the page size a core that does not say its own is read
	// with (see PageSizeFromAuxv: a live process's and a core's NT_AUXV
	// say it); PageSizes are those the kernel can be built with.
	PageSize  uint64
	PageSizes []uint64

	// Regs names the register file in DWARF numbering.
	Regs RegFile

	// Syscall is the convention of a syscall instruction: the register of
	// the number, of the arguments in order and of the result (DWARF
	// numbers). Call is a function call's: the argument registers in
	// order and the result's.
	Syscall, Call Convention

	// Perf is the perf_event_attr.sample_regs_user mask the unwinder
	// needs and, in the order the kernel dumps them (ascending bit), the
	// DWARF register each dumped word is.
	Perf PerfRegs

	// Prstatus is a core's NT_PRSTATUS layout.
	Prstatus PrstatusLayout

	// Words says where the pc, the stack pointer and the thread pointer
	// are among the words a target.Regs holds for this machine: pr_reg's,
	// then (aarch64) the thread pointer from TLSNote. NumWords is how
	// many it holds.
	Words    WordIndex
	NumWords int

	// TLSNote is the core note that holds the thread pointer when
	// NT_PRSTATUS does not (aarch64's NT_ARM_TLS); 0 when pr_reg has it.
	TLSNote elf.NType

	// StackAlign is the stack pointer's alignment at a call; RedZone the
	// bytes below the stack pointer a leaf function may use without
	// moving it, which code placed on a thread's stack must leave alone.
	StackAlign, RedZone uint64

	// TLSAbove: the machine's TLS is variant I (glibc's TLS_DTV_AT_TP):
	// the thread pointer points at a two-word TCB (dtv, private) with
	// the static TLS blocks above it and struct pthread below. false is
	// variant II (TLS_TCB_AT_TP): the blocks below, the TCB (struct
	// pthread, whose first word points at itself) above.
	TLSAbove bool

	// vaBits is the width of a user virtual address: what is above it in a
	// code pointer is a pointer authentication code (aarch64), and tagBits
	// says the top byte of a data pointer is ignored by loads and stores
	// (aarch64's TBI, which memory tagging uses).
	vaBits  uint
	tagByte bool

	syscalls map[string]int
}

// RegFile is where the registers every layer asks for are, as DWARF
// register numbers (an index into Regs).
type RegFile struct {
	PC, SP, FP, RA, TP int
	// Count is one past the highest DWARF number the architecture uses
	// here.
	Count int
	// Names are the registers' names by DWARF number ("" where none).
	Names []string
}

// WordIndex is where registers are among a machine's pr_reg words.
type WordIndex struct{ PC, SP, TP int }

// Convention says which registers (DWARF numbers) hold what across a call
// or a syscall. Nr is -1 for a function call.
type Convention struct {
	Nr     int
	Args   []int
	Result int
}

// PerfRegs is the perf user-register mask and what each dumped word is.
type PerfRegs struct {
	Mask  uint64
	Order []int // DWARF numbers, in the order the sample holds them
}

// PrstatusLayout is where the thread's id and registers are in a core's
// NT_PRSTATUS, and what each word of pr_reg is (a DWARF number, or -1 for
// a word with none: orig_rax, the segment selectors, pstate).
type PrstatusLayout struct {
	Size    int // sizeof(struct elf_prstatus)
	PidOff  int // pr_pid
	RegsOff int // pr_reg
	Words   []int
}

// Host is the machine arenactl was built for.
func Host() *Arch {
	a, _ := ByName(runtime.GOARCH)
	return a
}

// ByName returns the Arch GOARCH calls name.
func ByName(name string) (*Arch, bool) {
	for _, a := range all {
		if a.Name == name {
			return a, true
		}
	}
	return nil, false
}

var all = []*Arch{AMD64, ARM64}

// UnsupportedError is an ELF file (a core, a process's executable) of a
// machine or class arenactl does not read, or (Built set) of one it reads
// but this build of arenactl cannot trace: a live process is traced by an
// arenactl of its own machine. It is an errkind.ErrArch.
type UnsupportedError struct {
	Machine elf.Machine
	Class   elf.Class
	Built   *Arch // the machine this arenactl was built for, when that is what is wrong
}

func (e *UnsupportedError) Is(target error) bool { return target == errkind.ErrArch }

func (e *UnsupportedError) Error() string {
	if e.Built != nil {
		return fmt.Sprintf("an %s program; this arenactl is built for %s (an arenactl built with GOARCH=%s reads it)", machineName(e.Machine), e.Built.ELFName, goarchOf(e.Machine))
	}
	if e.Class != elf.ELFCLASS64 {
		return fmt.Sprintf("a %d-bit %s program; arenactl reads 64-bit x86_64 and aarch64 ones", classBits(e.Class), machineName(e.Machine))
	}
	return fmt.Sprintf("a program of another architecture (%s); arenactl reads x86_64 and aarch64 ones", machineName(e.Machine))
}

func goarchOf(m elf.Machine) string {
	for _, a := range all {
		if a.Machine == m {
			return a.Name
		}
	}
	return "?"
}

// ForProcess returns the Arch of a live process from its executable's ELF
// header, which hdr holds (its first 64 bytes, through /proc/PID/exe): a
// 32-bit program, one of a machine arenactl does not read, or one of
// another machine than the host's (run under binfmt emulation, or by a
// CPU that runs two) is refused. ok is false when hdr is no ELF header.
func ForProcess(hdr []byte) (a *Arch, ok bool, err error) {
	a, ok, err = FromHeader(hdr)
	if err != nil || !ok {
		return nil, ok, err
	}
	if h := Host(); a != h {
		return nil, true, &UnsupportedError{Machine: a.Machine, Class: elf.ELFCLASS64, Built: h}
	}
	return a, true, nil
}

func classBits(c elf.Class) int {
	if c == elf.ELFCLASS32 {
		return 32
	}
	return 64
}

func machineName(m elf.Machine) string {
	for _, a := range all {
		if a.Machine == m {
			return a.ELFName
		}
	}
	switch m {
	case elf.EM_386:
		return "i386"
	case elf.EM_ARM:
		return "arm"
	}
	return m.String()
}

// ForELF returns the Arch of an ELF file from its header's class and
// machine: how a core, or the executable of a process, says what it is.
func ForELF(class elf.Class, m elf.Machine) (*Arch, error) {
	for _, a := range all {
		if a.Machine == m && class == elf.ELFCLASS64 {
			return a, nil
		}
	}
	return nil, &UnsupportedError{Machine: m, Class: class}
}

// FromHeader reads the class and machine from the first 20 bytes of an ELF
// file (the identification and e_type, e_machine) and returns its Arch.
// ok is false when hdr is no ELF header at all.
func FromHeader(hdr []byte) (a *Arch, ok bool, err error) {
	if len(hdr) < 20 || string(hdr[:4]) != elf.ELFMAG {
		return nil, false, nil
	}
	class := elf.Class(hdr[elf.EI_CLASS])
	var m elf.Machine
	switch elf.Data(hdr[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		m = elf.Machine(binary.LittleEndian.Uint16(hdr[18:]))
	case elf.ELFDATA2MSB:
		m = elf.Machine(binary.BigEndian.Uint16(hdr[18:]))
	default:
		return nil, true, &UnsupportedError{Machine: elf.EM_NONE, Class: class}
	}
	a, err = ForELF(class, m)
	return a, true, err
}

func (a *Arch) String() string { return a.ELFName }

// Sys returns the number of the syscall the kernel calls name on this
// machine, and false where it has none (aarch64 has no open, poll, select,
// pause or epoll_wait: the generic table keeps only their *at and p*
// forms).
func (a *Arch) Sys(name string) (int, bool) {
	nr, ok := a.syscalls[name]
	return nr, ok
}

// SysName is Sys the other way.
func (a *Arch) SysName(nr int) (string, bool) {
	for n, v := range a.syscalls {
		if v == nr {
			return n, true
		}
	}
	return "", false
}

// MustSys is Sys for a syscall every supported machine has.
func (a *Arch) MustSys(name string) int {
	nr, ok := a.syscalls[name]
	if !ok {
		panic("arch: no syscall " + name + " on " + a.ELFName)
	}
	return nr
}

// StripCode clears what is not address in a code pointer read from a
// stack or a register: on aarch64 a return address signed with pointer
// authentication carries its code above the virtual address bits.
func (a *Arch) StripCode(p uint64) uint64 {
	if a.vaBits == 0 || a.vaBits >= 64 {
		return p
	}
	return p & (1<<a.vaBits - 1)
}

// StripTag clears the bits of a data pointer that loads and stores ignore:
// aarch64's top byte (TBI), where memory tagging keeps a pointer's tag. A
// heap walk and a scan for pointers compare addresses through it, so that
// a tagged pointer is not taken for garbage.
func (a *Arch) StripTag(p uint64) uint64 {
	if a.tagByte {
		return p &^ (0xff << 56)
	}
	return p
}

// AddrMask is StripTag as a mask: p&AddrMask() == StripTag(p).
func (a *Arch) AddrMask() uint64 {
	if a.tagByte {
		return 1<<56 - 1
	}
	return ^uint64(0)
}

// TagsPointers reports whether data pointers may carry a tag StripTag
// removes.
func (a *Arch) TagsPointers() bool { return a.tagByte }

// PageSizeFromAuxv returns AT_PAGESZ from an auxiliary vector (a live
// process's /proc/PID/auxv, a core's NT_AUXV), as the kernel gave it to the
// process: the page size is read from the target, never assumed (aarch64
// kernels are built with 4, 16 or 64 KiB pages). ok is false when the
// vector has none or an implausible one.
func (a *Arch) PageSizeFromAuxv(auxv []byte) (size uint64, ok bool) {
	const atNull, atPagesz = 0, 6
	w := a.PtrSize
	for i := 0; i+2*w <= len(auxv); i += 2 * w {
		key, val := binary.LittleEndian.Uint64(auxv[i:]), binary.LittleEndian.Uint64(auxv[i+w:])
		switch key {
		case atNull:
			return 0, false
		case atPagesz:
			for _, s := range a.PageSizes {
				if s == val {
					return val, true
				}
			}
			return 0, false
		}
	}
	return 0, false
}
