package ptrace

import (
	"encoding/binary"

	"github.com/arenactl/arenactl/internal/arch/site"
	"github.com/arenactl/arenactl/internal/procfs"
)

// codeOff is where the site's code page is: the page after the header.
const codeOff = site.CodeOff

// Register slots in the site, in the order the routine loads them
// (internal/arch/site's site_amd64.S, restore).
var siteRegs = []struct {
	name string
	get  func(*Regs) uint64
}{
	{"r8", func(r *Regs) uint64 { return r.R8 }},
	{"r9", func(r *Regs) uint64 { return r.R9 }},
	{"r10", func(r *Regs) uint64 { return r.R10 }},
	{"r11", func(r *Regs) uint64 { return r.R11 }},
	{"r12", func(r *Regs) uint64 { return r.R12 }},
	{"r13", func(r *Regs) uint64 { return r.R13 }},
	{"r14", func(r *Regs) uint64 { return r.R14 }},
	{"r15", func(r *Regs) uint64 { return r.R15 }},
	{"rdi", func(r *Regs) uint64 { return r.Rdi }},
	{"rsi", func(r *Regs) uint64 { return r.Rsi }},
	{"rbp", func(r *Regs) uint64 { return r.Rbp }},
	{"rbx", func(r *Regs) uint64 { return r.Rbx }},
	{"rdx", func(r *Regs) uint64 { return r.Rdx }},
	{"rcx", func(r *Regs) uint64 { return r.Rcx }},
	{"rax", func(r *Regs) uint64 { return r.Rax }},
}

const (
	slotFlags = regsOff + 8*15
	slotRsp   = regsOff + 8*16
	slotPC    = regsOff + 8*17
)

// sitePage0 builds the header and register block.
func sitePage0(size uint64, tid int, r *Regs, frameSP, rfbm uint64) []byte {
	p := make([]byte, codeOff)
	copy(p, siteMagic)
	le := binary.LittleEndian
	le.PutUint32(p[hdrVersion:], siteVersion)
	le.PutUint32(p[hdrVersion+4:], uint32(size))
	self := procfs.Self()
	le.PutUint64(p[hdrCreator:], uint64(self.Pid))
	le.PutUint64(p[hdrStart:], self.Start)
	le.PutUint64(p[hdrTid:], uint64(tid))
	le.PutUint64(p[hdrFrameSP:], frameSP)
	le.PutUint64(p[hdrRFBM:], rfbm)
	le.PutUint64(p[hdrSigAll:], ^uint64(0))
	for i, s := range siteRegs {
		le.PutUint64(p[regsOff+8*i:], s.get(r))
	}
	le.PutUint64(p[slotFlags:], r.Eflags)
	le.PutUint64(p[slotRsp:], r.Rsp)
	le.PutUint64(p[slotPC:], r.Rip)
	return p
}

// rfbmFor is the feature mask xrstor gets: every user feature XCR0 enables,
// except AMX tile state the thread does not use (restoring it would fault
// on a thread whose XFD arms it). Bytes 464..471 of the NT_X86_XSTATE area
// hold XCR0, as gdb reads it; 512..519 are XSTATE_BV.
func rfbmFor(xs []byte) uint64 {
	if len(xs) < 520 {
		return 3 // x87 and SSE
	}
	xcr0 := binary.LittleEndian.Uint64(xs[464:])
	bv := binary.LittleEndian.Uint64(xs[512:])
	const amx = 3 << 17
	return xcr0 &^ (amx &^ bv)
}
