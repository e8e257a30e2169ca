package ptrace

import (
	"encoding/binary"

	"github.com/arenactl/arenactl/internal/arch/site"
	"github.com/arenactl/arenactl/internal/procfs"
)

// On aarch64 the thread's registers are not loaded from the site's
// register block (the routine restores through rt_sigreturn from the whole
// frame at frameOff, frame_arm64.go): the block holds the pc and sp the
// frame puts back, for a later run to see where the thread resumes
// (SiteInfo.Resume), and user_pt_regs' 34 words would not fit before the
// lock routine's words.
const (
	slotPC   = regsOff
	slotSP   = regsOff + 8
	frameOff = site.FrameOff
	// codeOff: aarch64's site spaces its parts by 64 KiB, the largest
	// page its kernels use, so that the code part can be mprotected
	// alone under any (site.h).
	codeOff = site.Arm64CodeOff
)

// sitePage0 builds the header and the pc and sp slots.
func sitePage0(size uint64, tid int, r *Regs, frameSP uint64) []byte {
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
	le.PutUint64(p[hdrSigAll:], ^uint64(0))
	le.PutUint64(p[slotPC:], r.Pc)
	le.PutUint64(p[slotSP:], r.Sp)
	return p
}
