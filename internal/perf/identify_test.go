package perf

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// identify tells which of a session's events wrote a record stamped with
// an id not its own (the kernel's shared sample data) by its layout and
// a tracepoint's common_type, and nothing for a record no event of the
// session could have written.
func TestIdentify(t *testing.T) {
	s := &Session{events: []Event{
		{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS, Stack: true, Addr: true},
		{Name: "enter", Type: unix.PERF_TYPE_TRACEPOINT, Config: 700, Stack: true, Raw: true},
		{Name: "exit", Type: unix.PERF_TYPE_TRACEPOINT, Config: 701, Raw: true},
	}}
	u64 := func(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
	head := func(addr bool) []byte {
		b := u64(nil, 99)   // an id of another session's
		b = u64(b, 1<<32|1) // tid, pid
		b = u64(b, 12345)   // time
		if addr {
			b = u64(b, 0x1000) // addr
		}
		return u64(b, 0) // cpu
	}
	raw := func(b []byte, typ uint16, n int) []byte {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		r := make([]byte, n)
		binary.LittleEndian.PutUint16(r, typ)
		b = append(b, r...)
		for (len(b))%8 != 0 {
			b = append(b, 0)
		}
		return b
	}
	stack := func(b []byte, n int) []byte {
		b = u64(b, 2) // PERF_SAMPLE_REGS_ABI_64
		for range sampleRegs {
			b = u64(b, 7)
		}
		b = u64(b, uint64(n))
		b = append(b, make([]byte, n)...)
		return u64(b, uint64(n))
	}
	fault := stack(head(true), 64)
	enter := stack(raw(head(false), 700, 52), 128)
	exit := raw(head(false), 701, 20)
	for _, c := range []struct {
		name string
		rec  []byte
		want int
		ok   bool
	}{
		{"fault", fault, 0, true},
		{"enter", enter, 1, true},
		{"exit", exit, 2, true},
		{"another tracepoint's", raw(head(false), 702, 20), 0, false},
		{"cut short", fault[:len(fault)-8], 0, false},
		// No registers, no stack: the exit's layout could read so too.
		{"fault without registers", u64(u64(head(true), 0), 0), 0, false},
		{"longer", append(append([]byte(nil), exit...), make([]byte, 8)...), 0, false},
	} {
		ei, ok := s.identify(c.rec)
		if ok != c.ok || ok && ei != c.want {
			t.Errorf("%s: event %d, %v; want %d, %v", c.name, ei, ok, c.want, c.ok)
		}
	}
}
