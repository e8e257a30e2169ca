package arch

// MaxRegs bounds the DWARF numbers Regs holds: x86_64's gs.base is 59,
// aarch64's TPIDR_EL0 is 36.
const MaxRegs = 64

// Regs is a thread's registers by DWARF number, with the set of those
// known: a core's thread knows every general register, a perf sample only
// those its mask asked for.
type Regs struct {
	V     [MaxRegs]uint64
	Valid uint64 // bit n: V[n] is known
}

// Set stores v as register n and marks it known.
func (r *Regs) Set(n int, v uint64) {
	r.V[n] = v
	r.Valid |= 1 << n
}

// Get returns register n and whether it is known.
func (r *Regs) Get(n int) (uint64, bool) {
	if n < 0 || n >= MaxRegs {
		return 0, false
	}
	return r.V[n], r.Valid&(1<<n) != 0
}

// FromPrstatus decodes pr_reg (the words of the architecture's
// elf_gregset_t, as NT_PRSTATUS and PTRACE_GETREGSET with NT_PRSTATUS give
// them) into Regs.
func (a *Arch) FromPrstatus(words []uint64) Regs {
	var r Regs
	for i, n := range a.Prstatus.Words {
		if n >= 0 && i < len(words) {
			r.Set(n, words[i])
		}
	}
	return r
}

// FromPerf decodes a perf sample's user registers (as many words as the
// mask has bits, in ascending bit order) into Regs.
func (a *Arch) FromPerf(words []uint64) Regs {
	var r Regs
	for i, n := range a.Perf.Order {
		if i < len(words) {
			r.Set(n, words[i])
		}
	}
	return r
}

// perfOrder lists the DWARF number of every bit of mask, in ascending bit
// order, from a table of perf register index to DWARF number.
func perfOrder(mask uint64, dwarf map[int]int) []int {
	var out []int
	for bit := 0; bit < 64; bit++ {
		if mask&(1<<bit) != 0 {
			out = append(out, dwarf[bit])
		}
	}
	return out
}
