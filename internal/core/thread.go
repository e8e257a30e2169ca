package core

// Thread is one NT_PRSTATUS: a thread's id and its registers when the core
// was written.
type Thread struct {
	Tid  int
	Regs [27]uint64 // user_regs_struct, in the kernel's order
}

// Indexes into user_regs_struct (x86_64).
const (
	regRip    = 16
	regRsp    = 19
	regFsBase = 21
)

func (t Thread) PC() uint64     { return t.Regs[regRip] }
func (t Thread) SP() uint64     { return t.Regs[regRsp] }
func (t Thread) FsBase() uint64 { return t.Regs[regFsBase] }
