package symbolize

// SetMaxDWARF sets the DWARF a Symbolizer made from now on may read, and
// returns the bound it replaced.
func SetMaxDWARF(n uint64) uint64 {
	old := maxDWARF
	maxDWARF = n
	return old
}

// DWARFBytes is dwarfBytes for the tests.
var DWARFBytes = dwarfBytes
