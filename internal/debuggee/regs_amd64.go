package debuggee

// Indexes into Regs on x86_64, in user_regs_struct's order, for the files
// built for x86_64 alone that copy a record's words into it (perf's, the
// heap sampler's ring); everything else asks arch.Arch.
const (
	RegR15 = iota
	RegR14
	RegR13
	RegR12
	RegRBP
	RegRBX
	RegR11
	RegR10
	RegR9
	RegR8
	RegRAX
	RegRCX
	RegRDX
	RegRSI
	RegRDI
	RegOrigRAX
	RegRIP
	RegCS
	RegEFLAGS
	RegRSP
	RegSS
	RegFSBase
	RegGSBase
	RegDS
	RegES
	RegFS
	RegGS
)
