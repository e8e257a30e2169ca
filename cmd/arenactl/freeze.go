package main

import (
	"github.com/spf13/pflag"

	"github.com/arenactl/arenactl/internal/inspect"
)

// holdFlag is --freeze: how a read-only command keeps the process still.
type holdFlag struct{ h inspect.Hold }

func (f *holdFlag) String() string { return f.h.String() }
func (f *holdFlag) Type() string   { return "mode" }
func (f *holdFlag) Set(s string) error {
	h, err := inspect.ParseHold(s)
	if err == nil {
		f.h = h
	}
	return err
}

const freezeUsage = `how the process is kept still while its memory is read: ` +
	`"auto" (an image if one can be made safely, else "walk"), ` +
	`"image" (every thread stopped only while a copy-on-write image is made by a raw clone in one thread, then the image is read while the process runs; no code of the program's runs), ` +
	`"walk" (every thread stopped for the whole read; nothing is written into the process)`

// registerFreeze adds --freeze to fs; none allows "none" (the same as
// --no-freeze).
func registerFreeze(fs *pflag.FlagSet, f *holdFlag, none bool) {
	usage := freezeUsage
	if none {
		usage += `, "none" (stop nothing: numbers may be torn)`
	}
	fs.Var(f, "freeze", usage)
}
