package sampler

import "github.com/arenactl/arenactl/internal/module"

// GotSlots lists the GOT entries the sampler would patch in t's modules.
func GotSlots(mods *module.Table) []uint64 {
	var out []uint64
	for _, m := range mods.Modules() {
		sl, _ := gotSlots(m)
		for _, s := range sl {
			out = append(out, s.Addr)
		}
	}
	return out
}

// Base is where the sampler is mapped.
func (s *Sampler) Base() uint64 { return s.base }
