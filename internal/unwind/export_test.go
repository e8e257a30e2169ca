package unwind

import "github.com/arenactl/arenactl/internal/module"

// IgnoreCFI makes the unwinder treat the addresses ignore matches (file
// virtual addresses of a module) as having no CFI, so that the tests reach
// the fallbacks (signal trampoline by its code, PLT stubs) in real programs
// whose every function has CFI.
func IgnoreCFI(u *Unwinder, ignore func(m *module.Module, vaddr uint64) bool) { u.ignoreCFI = ignore }
