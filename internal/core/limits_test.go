package core

import (
	"encoding/binary"
	"strings"
	"testing"
)

// coreWithNotes is a core of one page of memory whose PT_NOTE segment is
// notes (made with cnote).
func coreWithNotes(notes []byte) []byte {
	const ehsize, phsize = 64, 56
	b := make([]byte, ehsize+2*phsize)
	copy(b, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(b[16:], 4)  // ET_CORE
	binary.LittleEndian.PutUint16(b[18:], 62) // EM_X86_64
	binary.LittleEndian.PutUint32(b[20:], 1)
	binary.LittleEndian.PutUint64(b[32:], ehsize)
	binary.LittleEndian.PutUint16(b[52:], ehsize)
	binary.LittleEndian.PutUint16(b[54:], phsize)
	binary.LittleEndian.PutUint16(b[56:], 2)
	noteOff := uint64(len(b))
	ph := b[ehsize:]
	binary.LittleEndian.PutUint32(ph, 4) // PT_NOTE
	binary.LittleEndian.PutUint64(ph[8:], noteOff)
	binary.LittleEndian.PutUint64(ph[32:], uint64(len(notes)))
	ph = b[ehsize+phsize:]
	binary.LittleEndian.PutUint32(ph, 1) // PT_LOAD
	binary.LittleEndian.PutUint32(ph[4:], 6)
	binary.LittleEndian.PutUint64(ph[8:], noteOff+uint64(len(notes)))
	binary.LittleEndian.PutUint64(ph[16:], 0x400000)
	binary.LittleEndian.PutUint64(ph[32:], 4096)
	binary.LittleEndian.PutUint64(ph[40:], 4096)
	b = append(b, notes...)
	return append(b, make([]byte, 4096)...)
}

// cnote is one note named CORE.
func cnote(typ uint32, desc []byte) []byte {
	n := make([]byte, 20, 20+len(desc)+3)
	binary.LittleEndian.PutUint32(n, 5)
	binary.LittleEndian.PutUint32(n[4:], uint32(len(desc)))
	binary.LittleEndian.PutUint32(n[8:], typ)
	copy(n[12:], "CORE")
	n = append(n, desc...)
	return append(n, make([]byte, (4-len(desc)%4)%4)...)
}

func prstatusNote(tid int) []byte {
	d := make([]byte, prstatusRegs+27*8+8)
	binary.LittleEndian.PutUint32(d[prstatusPid:], uint32(tid))
	return cnote(ntPrstatus, d)
}

// A core's notes cannot make arenactl hold more than a real process has:
// 3 million NT_PRSTATUS notes once took 3.5 GB, an NT_FILE of 5 million
// entries 944 MB. Past the limits the README states, the core is refused
// as damaged (exit 12), before the threads or files are held (issue 22,
// item 15).
func TestNotesAreBounded(t *testing.T) {
	one := prstatusNote(1)
	notes := make([]byte, 0, (maxThreads+1)*len(one))
	for i := 0; i <= maxThreads; i++ {
		notes = append(notes, one...)
	}
	_, err := OpenBytes("threads", coreWithNotes(notes))
	if ce := (*Error)(nil); err == nil || !strings.Contains(err.Error(), "more than 131072 threads") {
		t.Errorf("%d threads: %v (%T, want %T)", maxThreads+1, err, err, ce)
	}

	n := maxMappings + 1
	file := make([]byte, 16, 16+24*n+2*n)
	binary.LittleEndian.PutUint64(file, uint64(n))
	binary.LittleEndian.PutUint64(file[8:], 4096)
	for i := 0; i < n; i++ {
		file = binary.LittleEndian.AppendUint64(file, 0x400000)
		file = binary.LittleEndian.AppendUint64(file, 0x401000)
		file = binary.LittleEndian.AppendUint64(file, 0)
	}
	for i := 0; i < n; i++ {
		file = append(file, "x\x00"...)
	}
	_, err = OpenBytes("files", coreWithNotes(append(prstatusNote(1), cnote(ntFile, file)...)))
	if err == nil || !strings.Contains(err.Error(), "more than 262144") {
		t.Errorf("NT_FILE of %d files: %v", n, err)
	}
	if _, ok := err.(*Error); !ok {
		t.Errorf("%T, want a *core.Error (exit 12)", err)
	}

	// Within the limits, a core of many threads reads.
	many := make([]byte, 0, 1000*len(one))
	for i := 0; i < 1000; i++ {
		many = append(many, prstatusNote(i+1)...)
	}
	c, err := OpenBytes("many", coreWithNotes(many))
	if err != nil || len(c.Threads) != 1000 {
		t.Fatalf("1000 threads: %v", err)
	}
}
