package maps

import (
	"strings"
	"testing"
)

// The parsers read text from a process we do not trust (a core file's
// notes may be anything), so whatever the input, they must return an
// error rather than panic, and what they accept must be well formed.

func FuzzParseMaps(f *testing.F) {
	f.Add(sampleMaps)
	f.Add("00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon\n")
	f.Add("7f0e2c000000-7f0e2c021000 rw-p 00000000 00:00 0  [anon: glibc: malloc arena]\n")
	f.Add("7f0e37c00000-7f0e37c01000 r--p 00000000 fe:00 1234   /tmp/a b (deleted)\n")
	f.Add("0-0 rw-p 0 0:0 0\n")
	f.Add("ffffffffffffffff-1 rw-p 0 0:0 0\n")
	f.Add("garbage\n")
	f.Fuzz(func(t *testing.T, text string) {
		ms, err := ParseMaps(strings.NewReader(text))
		if err != nil {
			return
		}
		checkParsed(t, ms)
	})
}

func FuzzParseSmaps(f *testing.F) {
	f.Add(sampleSmaps)
	f.Add(sampleRollup)
	f.Add("00400000-00452000 r-xp 00000000 08:02 1 /bin/x\nRss: 4 kB\nVmFlags: rd ex\n")
	f.Add("00400000-00452000 r-xp 00000000 08:02 1 /bin/x\nRss: 18014398509481983 kB\n")
	f.Add("Rss: 4 kB\n")
	f.Fuzz(func(t *testing.T, text string) {
		ms, err := ParseSmaps(strings.NewReader(text))
		if err == nil {
			checkParsed(t, ms)
		}
		// The rollup parser shares the line code; give it the same input.
		ParseRollup(strings.NewReader(text))
	})
}

// checkParsed checks what a parser accepted, and that the code consuming
// it (Classify, Summarize, Find) copes with it too.
func checkParsed(t *testing.T, ms []Mapping) {
	t.Helper()
	var total uint64
	for _, m := range ms {
		if m.End < m.Start || len(m.Perms) != 4 {
			t.Fatalf("accepted malformed mapping %+v", m)
		}
		total += m.Size()
	}
	Classify(ms, Hints{ExePath: "/bin/x", StackPointers: map[int]uint64{1: 0x7fff0000, 2: 0}})
	var sum uint64
	for _, s := range Summarize(ms) {
		sum += s.Size
	}
	if sum != total {
		t.Fatalf("Summarize sizes add to %d, mappings to %d", sum, total)
	}
	for _, m := range ms {
		Find(ms, m.Start)
	}
}
