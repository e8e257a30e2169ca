// Package bpf owns arenactl's use of the kernel's eBPF: programs written
// as instructions here (no compiler, no object files), loaded with the
// bpf(2) system call, attached to raw tracepoints, and the maps they write
// to (a ring buffer read from memory, an array of counters). It knows
// nothing of what a program records; its callers say that. Its errors
// carry a Kind that matches errkind's, as package perf's do.
//
// The instruction set and the bpf(2) attributes are the kernel's UAPI
// (include/uapi/linux/bpf.h, Documentation/bpf/standardization/
// instruction-set.rst); golang.org/x/sys/unix has the constants but not
// the attributes' layouts, which are written out here.
package bpf

import "encoding/binary"

// Insn is one eBPF instruction (struct bpf_insn); a 64-bit immediate load
// takes two.
type Insn struct {
	Code     uint8
	Dst, Src uint8
	Off      int16
	Imm      int32
}

// Registers: R0 the result, R1..R5 a call's arguments (clobbered by it),
// R6..R9 kept across calls, R10 the frame pointer (read only).
const (
	R0 uint8 = iota
	R1
	R2
	R3
	R4
	R5
	R6
	R7
	R8
	R9
	R10
)

// Sizes of memory accesses.
const (
	W  = 0x00 // 4 bytes
	H  = 0x08
	B  = 0x10
	DW = 0x18
)

const (
	clsLD    = 0x00
	clsLDX   = 0x01
	clsST    = 0x02
	clsSTX   = 0x03
	clsJMP   = 0x05
	clsALU64 = 0x07
	modeIMM  = 0x00
	modeMEM  = 0x60
	modeAtom = 0xc0
	srcK     = 0x00
	srcX     = 0x08
)

// ALU operations.
const (
	Add = 0x00
	Sub = 0x10
	Div = 0x30
	Or  = 0x40
	And = 0x50
	Lsh = 0x60
	Rsh = 0x70
	Xor = 0xa0
	Mov = 0xb0
)

// Jump conditions (unsigned comparisons).
const (
	JA  = 0x00
	JEq = 0x10
	JGt = 0x20
	JGe = 0x30
	JNe = 0x50
	JLt = 0xa0
	JLe = 0xb0
)

const (
	opCall = 0x80
	opExit = 0x90
)

// Helper functions (enum bpf_func_id).
const (
	FnMapLookupElem  = 1
	FnKtimeGetNs     = 5
	FnGetPrandomU32  = 7
	FnGetPidTgid     = 14
	FnProbeReadUser  = 112
	FnProbeReadKern  = 113
	FnRingbufReserve = 131
	FnRingbufSubmit  = 132
	FnRingbufQuery   = 134
)

// AluImm is dst op= imm (64-bit).
func AluImm(op, dst uint8, imm int32) Insn {
	return Insn{Code: clsALU64 | op | srcK, Dst: dst, Imm: imm}
}

// AluReg is dst op= src (64-bit).
func AluReg(op, dst, src uint8) Insn { return Insn{Code: clsALU64 | op | srcX, Dst: dst, Src: src} }

// MovImm is dst = imm, MovReg dst = src.
func MovImm(dst uint8, imm int32) Insn { return AluImm(Mov, dst, imm) }
func MovReg(dst, src uint8) Insn       { return AluReg(Mov, dst, src) }

// Load is dst = *(size *)(src + off).
func Load(size, dst, src uint8, off int16) Insn {
	return Insn{Code: clsLDX | modeMEM | size, Dst: dst, Src: src, Off: off}
}

// Store is *(size *)(dst + off) = src; StoreImm stores imm.
func Store(size, dst, src uint8, off int16) Insn {
	return Insn{Code: clsSTX | modeMEM | size, Dst: dst, Src: src, Off: off}
}
func StoreImm(size, dst uint8, off int16, imm int32) Insn {
	return Insn{Code: clsST | modeMEM | size, Dst: dst, Off: off, Imm: imm}
}

// AtomicAdd is lock *(size *)(dst + off) += src (W or DW).
func AtomicAdd(size, dst, src uint8, off int16) Insn {
	return Insn{Code: clsSTX | modeAtom | size, Dst: dst, Src: src, Off: off, Imm: Add}
}

// LoadMap is dst = the map fd's map (a 64-bit immediate load, two slots).
func LoadMap(dst uint8, fd int) []Insn {
	return []Insn{{Code: clsLD | modeIMM | DW, Dst: dst, Src: 1 /* BPF_PSEUDO_MAP_FD */, Imm: int32(fd)}, {}}
}

// JumpImm jumps off instructions ahead when dst op imm; JumpReg compares
// with src.
func JumpImm(op, dst uint8, imm int32, off int16) Insn {
	return Insn{Code: clsJMP | op | srcK, Dst: dst, Imm: imm, Off: off}
}
func JumpReg(op, dst, src uint8, off int16) Insn {
	return Insn{Code: clsJMP | op | srcX, Dst: dst, Src: src, Off: off}
}

// Call calls helper fn; Exit returns R0.
func Call(fn int32) Insn { return Insn{Code: clsJMP | opCall, Imm: fn} }
func Exit() Insn         { return Insn{Code: clsJMP | opExit} }

// encode is the instructions as the kernel takes them.
func encode(insns []Insn) []byte {
	b := make([]byte, 0, 8*len(insns))
	for _, in := range insns {
		b = append(b, in.Code, in.Dst&0xf|in.Src<<4)
		b = binary.LittleEndian.AppendUint16(b, uint16(in.Off))
		b = binary.LittleEndian.AppendUint32(b, uint32(in.Imm))
	}
	return b
}

// Asm assembles a program whose jumps name labels.
type Asm struct {
	insns  []Insn
	labels map[string]int
	jumps  map[int]string // instruction index -> the label it jumps to
}

// Emit appends instructions.
func (a *Asm) Emit(in ...Insn) { a.insns = append(a.insns, in...) }

// Label names the next instruction.
func (a *Asm) Label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.insns)
}

func (a *Asm) jump(in Insn, label string) {
	if a.jumps == nil {
		a.jumps = map[int]string{}
	}
	a.jumps[len(a.insns)] = label
	a.insns = append(a.insns, in)
}

// If jumps to label when dst op imm.
func (a *Asm) If(op, dst uint8, imm int32, label string) { a.jump(JumpImm(op, dst, imm, 0), label) }

// IfReg jumps to label when dst op src.
func (a *Asm) IfReg(op, dst, src uint8, label string) { a.jump(JumpReg(op, dst, src, 0), label) }

// Goto jumps to label.
func (a *Asm) Goto(label string) { a.jump(JumpImm(JA, 0, 0, 0), label) }

// Insns resolves the jumps.
func (a *Asm) Insns() ([]Insn, error) {
	out := append([]Insn(nil), a.insns...)
	for i, l := range a.jumps {
		to, ok := a.labels[l]
		if !ok {
			return nil, &Error{Kind: KindOther, Op: "assembling", Err: errUnknownLabel(l)}
		}
		out[i].Off = int16(to - i - 1)
	}
	return out, nil
}

type errUnknownLabel string

func (e errUnknownLabel) Error() string { return "no label " + string(e) }
