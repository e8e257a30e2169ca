package sampler

import (
	"slices"

	"github.com/arenactl/arenactl/internal/module"
)

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

// Orphan makes the sampler look like one a killed arenactl left: its
// creator becomes a process that does not exist.
func (s *Sampler) Orphan() error {
	var w [16]byte
	w[0], w[1], w[2], w[3] = 0xff, 0xff, 0xff, 0x3f
	_, err := s.t.WriteAt(w[:], s.base+symCfg+cfgCreator)
	return err
}

// DirectJumps applies directJumps to a copy of the image mapped at base,
// with every real function at fn, and returns how many hooks it changed.
func DirectJumps(base, fn uint64) int {
	img := append([]byte(nil), image...)
	real := map[string]uint64{}
	for name := range hooked {
		real[name] = fn
	}
	directJumps(img, base, real)
	n := 0
	for name, h := range hooked {
		_ = name
		for at := h.hook; at < hookEnds[slices.Index(hookEnds, h.hook)+1]; at++ {
			if img[at] != image[at] {
				n++
				break
			}
		}
	}
	return n
}
