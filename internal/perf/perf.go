// Package perf owns the kernel's perf_event interface for arenactl: sampling
// events opened on every thread of a process (and, by inheritance, on the
// threads they create), read from memory-mapped ring buffers, one per CPU,
// and parsed into samples carrying the user registers and a copy of the top
// of the user stack, as `perf record --call-graph dwarf` takes them. Nothing
// is written into the process: the kernel samples it. It knows nothing of
// malloc, unwinding or symbols; its errors match errkind's kinds for those
// that decide what the user must do.
//
// It also owns the eBPF program that records a process's memory syscalls
// (Calls: bpf/calls.c, compiled by go generate with cilium/ebpf's bpf2go,
// loaded, attached and read with cilium/ebpf), whose records are read as
// samples beside the events'.
package perf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/arenactl/arenactl/internal/errkind"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/procfs"
)

// Event is one event to sample.
type Event struct {
	Name   string
	Type   uint32 // unix.PERF_TYPE_SOFTWARE, PERF_TYPE_TRACEPOINT...
	Config uint64
	// Period: one sample every Period events (1: every one).
	Period uint64
	// Stack: take the user registers and a copy of the user stack's top.
	Stack bool
	// Addr: the address the event concerns (a fault's).
	Addr bool
	// Raw: the tracepoint's raw record (its fields).
	Raw bool
	// StackSize, when not 0, is this event's stack copy (Options'
	// otherwise).
	StackSize uint32
	// Filter, for a tracepoint, is the kernel's filter on its fields
	// ("member == 0"): the records it fails are never written.
	Filter string
}

// Options tune the rings and the stack copies.
type Options struct {
	// StackSize is the bytes of user stack copied per sample (rounded
	// down to 8; DefaultStackSize when 0).
	StackSize uint32
	// RingPages is the data pages of each CPU's ring, a power of two
	// (DefaultRingPages when 0).
	RingPages int
}

const (
	DefaultStackSize = 8192
	DefaultRingPages = 512 // 2 MiB per CPU
)

// regsMask selects the user registers the unwinder needs (the machine's
// arch.Arch.Perf); the sample lists them in ascending bit order, and
// sampleRegs says where each goes in debuggee.Regs (-1: nowhere yet), in
// perfregs_ARCH.go.

// Sample is one PERF_RECORD_SAMPLE, its data owned by the sample.
type Sample struct {
	Event    int // index into the session's events
	Pid, Tid int
	Time     uint64 // CLOCK_MONOTONIC, ns (Now's clock)
	Addr     uint64
	CPU      int
	Raw      []byte
	// HaveRegs: Regs and Stack were taken (the thread was in user mode
	// or in a syscall from it). Only the registers regsMask selects are
	// there; the others are zero.
	HaveRegs bool
	Regs     debuggee.Regs
	// Stack is the copy of the user stack from Regs.SP, as much as the
	// kernel could copy (its dyn_size).
	Stack []byte
	// Inherited: the event that took it was inherited by a thread
	// created after the session opened.
	Inherited bool
	// Call is the syscall a Calls program recorded (Event -1); Nr 0
	// for a perf event's sample.
	Call Syscall
	// RSS is the change of a page counter a Calls program recorded
	// (Event -1, Call.Nr 0).
	RSS RSSChange
	// Later is what a Stream's early function read of the process for
	// the sample, from LaterAddr, as soon as the sample was read.
	Later     []byte
	LaterAddr uint64
}

// Session is a set of events on every thread of a process, with a ring
// per CPU.
type Session struct {
	Pid    int
	proc   *procfs.Proc // the process's /proc directory
	events []Event
	attrs  []unix.PerfEventAttr
	cpus   []int
	rings  []*ring // by index into cpus
	fds    []int
	// owner: the primary id of every event opened -> its event index and
	// the thread it was opened on.
	owner map[uint64]eventOwner
	tids  map[int]bool // threads opened for
	late  map[int]bool // threads opened for after the first pass
	seen  map[int]bool // late threads that inherited events too
	// Lost counts the records the rings had no room for.
	Lost uint64
	// Throttled counts the times the kernel throttled an event (more
	// samples a second than perf_event_max_sample_rate).
	Throttled uint64
	slab      []byte
	// newSlab, when set, hands out an empty slab of room for n bytes at
	// least; ok false: no room, the sample is dropped (Dropped).
	newSlab func(n int) (slab []byte, ok bool)
	// Dropped counts samples read from the rings and let go for want of
	// room to keep them (a Stream's bound).
	Dropped uint64
	// Unknown counts sample records none of the session's events could
	// have written (identify).
	Unknown uint64
	pollFds []unix.PollFd // Wait's, reused (one reader waits)
	// calls, when set, are read with the rings (AddCalls); callsMore
	// says the last read left some in its ring.
	calls     *Calls
	callsMore bool
	// read and keys are ReadInto's room, reused; held the samples it
	// held back for the next read.
	read, held []Sample
	keys       []sortKey
}

// AddCalls has Read return the calls c records too, among the samples
// (Event -1), and Disable detach it. The session does not own c.
func (s *Session) AddCalls(c *Calls) { s.calls = c }

type eventOwner struct {
	event int
	tid   int
}

// Open opens events on every thread of pid, on every online CPU, with
// inheritance, so that threads created later are sampled too (as perf
// record -p does), but not the processes it forks: a ring per CPU that
// every event of that CPU writes to.
func Open(pid int, events []Event, o Options) (_ *Session, err error) {
	return OpenProc(procfs.ByPid(pid), events, o)
}

// OpenProc is Open on the process whose /proc directory p holds: its
// threads are listed there, and a thread an event was opened on is kept
// only if it is still one of that process's once the event is open (a
// thread id, like a pid, may be given to another process once its thread
// has exited).
func OpenProc(p *procfs.Proc, events []Event, o Options) (_ *Session, err error) {
	pid := p.Pid
	if o.StackSize == 0 {
		o.StackSize = DefaultStackSize
	}
	o.StackSize &^= 7
	if o.RingPages == 0 {
		o.RingPages = DefaultRingPages
	}
	if o.RingPages&(o.RingPages-1) != 0 {
		return nil, &Error{Op: "perf rings", Err: fmt.Errorf("%d pages is not a power of two", o.RingPages)}
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, &Error{Op: "listing CPUs", Err: err}
	}
	s := &Session{Pid: pid, proc: p, events: events, cpus: cpus, rings: make([]*ring, len(cpus)),
		owner: map[uint64]eventOwner{}, tids: map[int]bool{}, late: map[int]bool{}, seen: map[int]bool{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	for _, e := range events {
		s.attrs = append(s.attrs, attrFor(e, o.StackSize, o.RingPages))
	}
	tids, err := p.Tasks()
	if err != nil {
		return nil, wrap(fmt.Sprintf("process %d", pid), unix.ESRCH)
	}
	opened := 0
	for _, tid := range tids {
		ok, err := s.openThread(tid, o.RingPages)
		if err != nil {
			return nil, err
		}
		if ok {
			opened++
		}
	}
	if opened == 0 {
		return nil, wrap(fmt.Sprintf("process %d", pid), unix.ESRCH)
	}
	// A thread created by one not yet opened for, between the listing
	// and the opening, inherited nothing: a second listing finds it.
	// (One created after its creator was opened for inherited the
	// events and may be listed too: Read drops its own events' samples
	// once inherited ones are seen.)
	if tids, err = p.Tasks(); err == nil {
		for _, tid := range tids {
			if !s.tids[tid] {
				if _, err := s.openThread(tid, o.RingPages); err != nil {
					return nil, err
				}
				s.late[tid] = true
			}
		}
	}
	return s, nil
}

// openThread opens every event on tid on every CPU; false when the thread
// is gone.
func (s *Session) openThread(tid, pages int) (bool, error) {
	first := len(s.fds)
	var ids []uint64
	for ci, cpu := range s.cpus {
		for ei := range s.attrs {
			attr := s.attrs[ei]
			fd, err := unix.PerfEventOpen(&attr, tid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
			if errors.Is(err, unix.EINVAL) && attr.Bits&perfBitInheritThread != 0 {
				// A kernel before 5.13 knows no inherit_thread: children
				// inherit the events, and Read drops their samples.
				for i := range s.attrs {
					s.attrs[i].Bits &^= perfBitInheritThread
				}
				attr = s.attrs[ei]
				fd, err = unix.PerfEventOpen(&attr, tid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
			}
			if err != nil {
				if errors.Is(err, unix.ESRCH) {
					return false, nil
				}
				return false, wrap(fmt.Sprintf("perf_event_open %s on thread %d of process %d, CPU %d", s.events[ei].Name, tid, s.Pid, cpu), err)
			}
			s.fds = append(s.fds, fd)
			if f := s.events[ei].Filter; f != "" {
				// Inherited events use their parent's filter
				// (kernel/events/core.c, perf_tp_filter_match).
				b, err := unix.BytePtrFromString(f)
				if err == nil {
					_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_SET_FILTER, uintptr(unsafe.Pointer(b)))
					if e != 0 {
						err = e
					}
				}
				if err != nil {
					return false, &Error{Kind: errkind.ErrNoPerf, Op: fmt.Sprintf("perf: filter %q on %s", f, s.events[ei].Name), Err: err}
				}
			}
			if s.rings[ci] == nil {
				r, err := mapRing(fd, pages)
				if err != nil {
					return false, err
				}
				s.rings[ci] = r
			} else if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_OUTPUT, s.rings[ci].fd); err != nil {
				return false, wrap("perf: sharing CPU "+strconv.Itoa(cpu)+"'s ring", err)
			}
			var id uint64
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_ID, uintptr(unsafe.Pointer(&id))); e != 0 {
				return false, wrap("perf: event id", e)
			}
			s.owner[id] = eventOwner{event: ei, tid: tid}
			ids = append(ids, id)
		}
	}
	if _, err := os.Stat(s.proc.Path(fmt.Sprintf("task/%d", tid))); err != nil {
		// The thread exited after it was listed, and its id may now be
		// another process's thread: its events are stopped, and what
		// they recorded meanwhile is no event's (Unknown). Their
		// descriptors stay open until Close: the first on a CPU may
		// hold that CPU's ring.
		for _, fd := range s.fds[first:] {
			unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
		}
		for _, id := range ids {
			delete(s.owner, id)
		}
		return false, nil
	}
	s.tids[tid] = true
	return true, nil
}

// sampleType is what every sample carries: the event's id first, so that
// its layout can be known before the rest is parsed.
func sampleType(e Event) uint64 {
	t := uint64(unix.PERF_SAMPLE_IDENTIFIER | unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_TIME | unix.PERF_SAMPLE_CPU)
	if e.Addr {
		t |= unix.PERF_SAMPLE_ADDR
	}
	if e.Raw {
		t |= unix.PERF_SAMPLE_RAW
	}
	if e.Stack {
		t |= unix.PERF_SAMPLE_REGS_USER | unix.PERF_SAMPLE_STACK_USER
	}
	return t
}

// perfBitInheritThread is perf_event_attr's inherit_thread (bit 35 of its
// flags, Linux 5.13, include/uapi/linux/perf_event.h): only threads
// inherit the events, not the processes the target forks. With inherit
// alone a child's faults and calls, and those of the programs it execs,
// were the target's (a child touching 256 MiB was charged 257 MiB).
const perfBitInheritThread = 1 << 35

func attrFor(e Event, stack uint32, pages int) unix.PerfEventAttr {
	a := unix.PerfEventAttr{Type: e.Type, Config: e.Config, Sample: max(e.Period, 1), Sample_type: sampleType(e)}
	a.Size = uint32(unsafe.Sizeof(a))
	// Inherit to threads created later; sample_id_all so that a LOST
	// record carries an id too; kernel call chains never wanted. The
	// kernel side is not excluded: a fault taken by the kernel on the
	// process's memory (read() into a fresh buffer) is the process's
	// growth, and a tracepoint fires in the kernel.
	a.Bits = unix.PerfBitInherit | unix.PerfBitSampleIDAll | unix.PerfBitExcludeHv | unix.PerfBitExcludeCallchainKernel | unix.PerfBitWatermark |
		unix.PerfBitUseClockID | perfBitInheritThread
	// Samples are stamped with CLOCK_MONOTONIC, so that a caller can set
	// them against what it read of the process and when (Now).
	a.Clockid = unix.CLOCK_MONOTONIC
	// Wake a poller when a quarter of the ring is full.
	a.Wakeup = uint32(pages * os.Getpagesize() / 4)
	if e.Stack {
		a.Sample_regs_user = regsMask
		a.Sample_stack_user = stack
		if e.StackSize != 0 {
			a.Sample_stack_user = e.StackSize &^ 7
		}
	}
	return a
}

// Close closes every event and unmaps the rings: the kernel stops
// sampling the process (and its inherited events go with their parents).
func (s *Session) Close() error {
	for _, r := range s.rings {
		if r != nil {
			r.unmap()
		}
	}
	for _, fd := range s.fds {
		unix.Close(fd)
	}
	s.fds, s.rings = nil, nil
	return nil
}

// Disable stops every event, and the calls' program (the rings can still
// be read).
func (s *Session) Disable() {
	for _, fd := range s.fds {
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	if s.calls != nil {
		s.calls.Detach()
	}
}

// Threads is how many threads the events were opened on (inherited ones
// not counted).
func (s *Session) Threads() int { return len(s.tids) }

// Wait blocks until a ring is half full or ms milliseconds pass.
func (s *Session) Wait(ms int) error {
	// The list is kept: a Stream's reader waits up to 500 times a second.
	fds := s.pollFds[:0]
	for _, r := range s.rings {
		if r != nil {
			fds = append(fds, unix.PollFd{Fd: int32(r.fd), Events: unix.POLLIN})
		}
	}
	s.pollFds = fds
	_, err := unix.Poll(fds, ms)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return wrap("perf: poll", err)
	}
	return nil
}

// Read takes every record from every ring and returns the samples sorted
// by time (a thread may move between CPUs, so a syscall's entry and exit
// can be in two rings).
func (s *Session) Read() []Sample { return s.ReadInto(nil, true) }

// maxCallsRead is the most records ReadInto takes of the calls' ring
// (Pending says when it left some).
const maxCallsRead = 16384

// Pending says that the last ReadInto left records in the calls' ring.
func (s *Session) Pending() bool { return s.callsMore }

// ReadInto is Read appending to out[:0] (its room reused).
//
// Unless all, the samples taken after the read began are held back for
// the next one: the rings are read one after the other, so a sample taken
// meanwhile in a ring read first comes in the next read, after a later one
// from a ring read last (a fault after the munmap that followed it).
func (s *Session) ReadInto(out []Sample, all bool) []Sample {
	cut := Now()
	in := s.read[:0]
	for _, smp := range s.held {
		var ok bool
		if smp.Stack, ok = s.keep(smp.Stack); !ok {
			s.Dropped++
			continue
		}
		if smp.Raw, ok = s.keep(smp.Raw); !ok {
			s.Dropped++
			continue
		}
		in = append(in, smp)
	}
	s.held = s.held[:0]
	defer func() { s.read = in[:0] }()
	for _, r := range s.rings {
		if r == nil {
			continue
		}
		r.read(func(typ uint32, rec []byte) {
			switch typ {
			case unix.PERF_RECORD_SAMPLE:
				if smp, ok := s.parse(rec); ok {
					in = append(in, smp)
				}
			case unix.PERF_RECORD_LOST:
				if len(rec) >= 16 {
					s.Lost += le64(rec[8:])
				}
			case unix.PERF_RECORD_THROTTLE:
				s.Throttled++
			}
		})
	}
	if s.calls != nil {
		// A bite of the calls' ring at a time, the rest left in the
		// ring (kernel memory already spent) for the next read: taken
		// whole, a ring of 32 MiB the reader was late for became 70,000
		// samples of 0.5 KiB each, twice (read and sorted), beside the
		// queue's bound. What the other rings gave after the last call
		// taken is held back, as for a read's own time.
		max := -1
		if !all {
			max = maxCallsRead
		}
		var last uint64
		s.callsMore = s.calls.ReadN(max, func(smp Sample) {
			last = smp.Time
			var ok bool
			if smp.Stack, ok = s.keep(smp.Stack); !ok {
				s.Dropped++
				return
			}
			in = append(in, smp)
		})
		if s.callsMore {
			cut = min(cut, last)
		}
	}
	s.read = in
	out = s.byTime(out[:0])
	if !all {
		// Held with copies of their data: this read's slabs go with
		// its batch.
		n := len(out)
		for n > 0 && out[n-1].Time > cut {
			n--
		}
		for _, smp := range out[n:] {
			smp.Stack = append([]byte(nil), smp.Stack...)
			smp.Raw = append([]byte(nil), smp.Raw...)
			s.held = append(s.held, smp)
		}
		out = out[:n]
	}
	// A thread opened for late that inherited events as well is sampled
	// twice: its own events' samples are dropped once an inherited one is
	// seen.
	kept := out[:0]
	for _, smp := range out {
		if s.late[smp.Tid] && smp.Event >= 0 {
			if smp.Inherited {
				s.seen[smp.Tid] = true
			} else if s.seen[smp.Tid] {
				continue
			}
		}
		kept = append(kept, smp)
	}
	return kept
}

// byTime appends the samples read (s.read) to out sorted by time, equal
// times in the order read. The samples are large (their registers) and
// come in runs already sorted (one per ring): a stable sort that moved
// them spent more than the reading, so their times are sorted and each
// sample moved once.
func (s *Session) byTime(out []Sample) []Sample {
	in := s.read
	if slices.IsSortedFunc(in, func(a, b Sample) int { return cmp.Compare(a.Time, b.Time) }) {
		return append(out, in...)
	}
	keys := s.keys[:0]
	for i := range in {
		keys = append(keys, sortKey{in[i].Time, i})
	}
	slices.SortStableFunc(keys, func(a, b sortKey) int { return cmp.Compare(a.t, b.t) })
	for _, k := range keys {
		out = append(out, in[k.i])
	}
	s.keys = keys
	return out
}

type sortKey struct {
	t uint64
	i int
}

// parse reads one sample record (after its 8-byte header).
func (s *Session) parse(rec []byte) (Sample, bool) {
	var smp Sample
	p := 0
	u64 := func() (uint64, bool) {
		if p+8 > len(rec) {
			return 0, false
		}
		v := le64(rec[p:])
		p += 8
		return v, true
	}
	id, ok := u64()
	if !ok {
		return smp, false
	}
	own, ok := s.owner[id]
	if !ok {
		// Not an id of ours, in a ring only our events write to: the
		// kernel stamped our sample with another event's id. It fills
		// one perf_sample_data for every event on a software event or
		// tracepoint in turn, and the id (with the other fields of
		// PERF_SAMPLE_ID_ALL) is set once, by the first event, since
		// Linux 6.3 (kernel/events/core.c, __perf_event_header__init_id):
		// with a second growth on the same process, one run's samples
		// all carried the other's ids and were dropped. Which of ours
		// wrote it is told by its layout and, for a tracepoint, by the
		// type its raw record begins with.
		ei, ok := s.identify(rec)
		if !ok {
			s.Unknown++
			return smp, false
		}
		own = eventOwner{event: ei, tid: -1}
	}
	e := s.events[own.event]
	st := sampleType(e)
	smp.Event = own.event
	v, ok := u64() // TID
	if !ok {
		return smp, false
	}
	smp.Pid, smp.Tid = int(uint32(v)), int(uint32(v>>32))
	if smp.Pid != s.Pid {
		// Another process's: one the target forked, on a kernel that
		// let it inherit the events.
		return smp, false
	}
	smp.Inherited = smp.Tid != own.tid
	if own.tid < 0 {
		// Which thread's event took it is not known: a thread not
		// opened for inherited it.
		smp.Inherited = !s.tids[smp.Tid]
	}
	if smp.Time, ok = u64(); !ok {
		return smp, false
	}
	if st&unix.PERF_SAMPLE_ADDR != 0 {
		if smp.Addr, ok = u64(); !ok {
			return smp, false
		}
	}
	if v, ok = u64(); !ok { // CPU
		return smp, false
	}
	smp.CPU = int(uint32(v))
	if st&unix.PERF_SAMPLE_RAW != 0 {
		if p+4 > len(rec) {
			return smp, false
		}
		n := int(uint32(rec[p]) | uint32(rec[p+1])<<8 | uint32(rec[p+2])<<16 | uint32(rec[p+3])<<24)
		p += 4
		if p+n > len(rec) {
			return smp, false
		}
		if smp.Raw, ok = s.keep(rec[p : p+n]); !ok {
			s.Dropped++
			return smp, false
		}
		p += n
		p = (p + 7) &^ 7 // the u32 and the data are padded to 8 together
	}
	if st&unix.PERF_SAMPLE_REGS_USER != 0 {
		abi, ok := u64()
		if !ok {
			return smp, false
		}
		if abi != 0 { // PERF_SAMPLE_REGS_ABI_NONE: no user registers
			var r debuggee.Regs
			for _, reg := range sampleRegs {
				v, ok := u64()
				if !ok {
					return smp, false
				}
				if reg >= 0 {
					r[reg] = v
				}
			}
			smp.Regs = r
			smp.HaveRegs = haveSampleRegs
		}
	}
	if st&unix.PERF_SAMPLE_STACK_USER != 0 {
		size, ok := u64()
		if !ok {
			return smp, false
		}
		if size > 0 {
			if p+int(size)+8 > len(rec) {
				return smp, false
			}
			data := rec[p : p+int(size)]
			p += int(size)
			dyn, _ := u64()
			if dyn < size {
				data = data[:dyn]
			}
			if smp.Stack, ok = s.keep(data); !ok {
				s.Dropped++
				return smp, false
			}
		}
	}
	return smp, true
}

// identify is which of the session's events wrote a sample record whose
// id is not theirs: a tracepoint whose layout the record fits exactly and
// whose id the raw record's common_type holds; else another event whose
// layout it fits, with the user registers it asks for (a record without
// them can be read in more than one layout, and is of no use).
func (s *Session) identify(rec []byte) (int, bool) {
	for _, tracepoints := range []bool{true, false} {
		for ei, e := range s.events {
			if (e.Type == unix.PERF_TYPE_TRACEPOINT) != tracepoints {
				continue
			}
			st := sampleType(e)
			raw, regs, ok := fits(rec, st)
			switch {
			case !ok:
			case tracepoints && len(raw) >= 2 && uint64(binary.LittleEndian.Uint16(raw)) == e.Config:
				return ei, true
			case !tracepoints && st&unix.PERF_SAMPLE_RAW == 0 && (regs || st&unix.PERF_SAMPLE_REGS_USER == 0):
				return ei, true
			}
		}
	}
	return 0, false
}

// fits says whether rec (a sample after its header) is laid out as
// sample type st says to its last byte, and returns its raw data and
// whether it holds user registers.
func fits(rec []byte, st uint64) (raw []byte, regs, ok bool) {
	p := 8 + 8 + 8 // id, tid, time
	if st&unix.PERF_SAMPLE_ADDR != 0 {
		p += 8
	}
	p += 8 // cpu
	if st&unix.PERF_SAMPLE_RAW != 0 {
		if p+4 > len(rec) {
			return nil, false, false
		}
		n := int(binary.LittleEndian.Uint32(rec[p:]))
		if p+4+n > len(rec) {
			return nil, false, false
		}
		raw = rec[p+4 : p+4+n]
		p = (p + 4 + n + 7) &^ 7
	}
	if st&unix.PERF_SAMPLE_REGS_USER != 0 {
		if p+8 > len(rec) {
			return nil, false, false
		}
		regs = le64(rec[p:]) != 0
		p += 8
		if regs {
			p += 8 * len(sampleRegs)
		}
	}
	if st&unix.PERF_SAMPLE_STACK_USER != 0 {
		if p+8 > len(rec) {
			return nil, false, false
		}
		size := le64(rec[p:])
		p += 8
		if size > uint64(len(rec)) {
			return nil, false, false
		}
		if size > 0 {
			p += int(size) + 8
		}
	}
	return raw, regs, p == len(rec)
}

// Now is the clock samples are stamped with (CLOCK_MONOTONIC), in ns.
func Now() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// keep copies b into the session's slab: one allocation for many
// samples, and none at all once a Stream recycles them, for a reader that
// must keep up with the rings (allocating drafted it into the garbage
// collector's work).
func (s *Session) keep(b []byte) ([]byte, bool) {
	if len(b) > cap(s.slab)-len(s.slab) {
		s.slab = nil
		if s.newSlab != nil {
			slab, ok := s.newSlab(len(b))
			if !ok {
				return nil, false
			}
			s.slab = slab
		} else {
			s.slab = make([]byte, 0, max(slabSize, len(b)))
		}
	}
	n := len(s.slab)
	s.slab = append(s.slab, b...)
	return s.slab[n:len(s.slab):len(s.slab)], true
}

const slabSize = 1 << 20

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// onlineCPUs parses /sys/devices/system/cpu/online ("0-3,6").
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	var cpus []int
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("online CPUs %q", b)
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("online CPUs %q", b)
			}
		}
		for c := a; c <= z; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Probe says whether the kernel lets this process sample pid's page
// faults as Open would (kernel side included): it opens and closes one
// counting event, so that a refusal is told before anything else is set
// up (tracefs mounted, rings mapped).
func Probe(pid int) error {
	a := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS}
	a.Size = uint32(unsafe.Sizeof(a))
	a.Bits = unix.PerfBitDisabled | unix.PerfBitInherit | unix.PerfBitExcludeHv
	fd, err := unix.PerfEventOpen(&a, pid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return wrap(fmt.Sprintf("perf events on process %d", pid), err)
	}
	unix.Close(fd)
	return nil
}
