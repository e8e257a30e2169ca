// Package sampler owns the heap sampler arenactl places in a live process:
// the in-target code (blob/sampler.c, built into the flat images
// sampler.bin for x86_64 and sampler_arm64.bin for aarch64 by go
// generate), pointing the process's GOT entries for the malloc family at
// it and back, and draining the ring of sampled
// allocations it fills. What the samples mean (stacks, estimates) is
// internal/stackprof's.
//
// Attach and Detach stop every thread for the few milliseconds they take:
// a GOT entry is rewritten while no thread can read it half written, and
// the image is mapped, made executable and unmapped by one stopped thread
// (internal/implant: raw syscalls, no code of the program's). In between
// the process runs with the hooks: a byte counter per thread decides, in a
// few instructions, which call is sampled.
package sampler

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/implant"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/procfs"
)

//go:generate sh blob/gen.sh .

// Layouts shared with blob/sampler.c (its _Static_asserts hold them).
const (
	cfgEnabled   = 16
	cfgRingSlots = 24
	cfgRing      = 32
	cfgHead      = 40
	cfgTail      = 48
	cfgDropped   = 56
	cfgInflight  = 64
	cfgDraw      = 72 // the random sequence's state
	cfgUntracked = 80
	cfgDraws     = 88
	nDraws       = 4096
	cfgCreator   = cfgDraws + 8*nDraws // pid, then start time
	cfgImageSize = cfgCreator + 16
	cfgNPatches  = cfgCreator + 24
	cfgPatches   = cfgCreator + 32 // {slot, orig, hook} each
	maxPatches   = 2048
	cfgClock     = cfgPatches + 24*maxPatches
	cfgFrees     = cfgClock + 8
	cfgFHead     = cfgClock + 16
	cfgFTail     = cfgClock + 24
	cfgFDropped  = cfgClock + 32
	cfgShortened = cfgClock + 40
	cfgShorts    = cfgClock + 48
	cfgShortN    = cfgClock + 56
	cfgSHead     = cfgClock + 64
	cfgSTail     = cfgClock + 72
	cfgShift     = cfgClock + 80 // the mean interval is the rate << this
	maxShift     = 10
	freeSlots    = 1 << 17
	freeRecSize  = 32 // seq, addr, stamp, to
	magic        = "ARSAMPLR"

	recKind     = 8
	recFlags    = 12
	recAddr     = 16
	recSize     = 24
	recTid      = 32
	recPC       = 40
	recSP       = 48
	recRegs     = 56 // rbx, rbp, r12..r15
	recStackLen = 104
	recOld      = 112
	recStamp    = 120
	recOldSize  = 128
	recStack    = 136
	StackCopy   = 8192
	recordSize  = recStack + StackCopy
	// ShortCopy is the stack a short record holds: its top.
	ShortCopy = 376
	shortSize = recStack + ShortCopy

	pageSize = 4096
)

// Kinds of record, as blob/sampler.c numbers them.
var kindNames = map[uint32]string{1: "malloc", 2: "calloc", 3: "realloc", 4: "reallocarray", 5: "posix_memalign",
	6: "aligned_alloc", 7: "memalign", 8: "valloc", 9: "pvalloc", 10: "free"}

// Options say how to sample.
type Options struct {
	// Rate is the mean number of bytes allocated between two samples (a
	// Poisson process over bytes, as jemalloc, tcmalloc and Go sample).
	Rate uint64
	// RingSlots is how many sampled allocations the ring holds between
	// two drains (a power of two, 1024 by default); each is 8.3 KiB.
	// ShortSlots is the ring of short records, which takes the samples
	// the first has no room for (a power of two, 8192 by default, 512
	// bytes each). Frees have a ring of their own (4 MiB), which frees
	// cannot fill (realloc's moves of sampled blocks can, and are counted
	// as lost frees then).
	RingSlots, ShortSlots int
	// Timeout bounds stopping every thread at attach and detach.
	Timeout time.Duration
}

// DefaultRate is jemalloc's and Go's mean sampling interval.
const DefaultRate = 512 << 10

// Record is one sampled call as the ring holds it.
type Record struct {
	Kind string
	Addr uint64 // the block (for free, the block given back)
	Size uint64 // bytes requested
	Old  uint64 // realloc: the block it replaced
	// OldSize: realloc, the usable bytes of Old, read from its chunk
	// header before glibc's realloc ran (what the call added is Size
	// less that).
	OldSize uint64
	// To: a free record of a sampled block that realloc moved: the
	// block's new address (the sampler watches it from now on).
	To        uint64
	Tid       int
	Untracked bool // the address set was full: this block's free goes unseen
	// Short: the record came from the short ring, its Stack only the top
	// ShortCopy bytes of the caller's (the full ring had no room). Thin:
	// a whole record that a ring more than half full took with chance
	// 2^-Thin (the others went short).
	Short bool
	Thin  int
	// Shift: the interval that ended in this sample had a mean of the
	// rate << Shift (the sampler doubles it while arenactl cannot keep
	// up): the sample is weighted by that rate.
	Shift int
	// Stamp orders records: a free's was taken before the block went back
	// to glibc, an allocation's after glibc handed it out.
	Stamp uint64
	// Moved: a realloc's that moved a sampled block, the low 32 bits of
	// its move's stamp (the free record with To), 0 if it made none: a
	// later realloc between the same two addresses is another call.
	Moved uint32
	// Regs are the caller's at the call, as many as the hook saves: pc
	// (the return address), sp, rbx, rbp and r12-r15. Stack is a copy of
	// its stack from sp.
	Regs  debuggee.Regs
	Stack []byte
}

// A Patch is one GOT entry pointed at a hook.
type Patch struct {
	Module, Name string
	Slot         uint64 // the GOT entry
	Orig         uint64 // what it held
	// Unloaded: its object was unloaded (dlclose) after it was patched;
	// the GOT went with it and there is nothing to restore.
	Unloaded bool
}

// Sampler is the sampler in one process.
type Sampler struct {
	t          *live.Target
	o          Options
	tramp      uint64
	base       uint64 // the image
	size       uint64
	ring       uint64
	slots      uint64
	tail       uint64
	frees      uint64 // the free ring
	ftail      uint64
	shorts     uint64 // the ring of short records
	stail      uint64
	shortSlots uint64
	real       map[string]uint64
	done       map[uint64]bool // GOT entries looked at
	parsed     map[*module.Module]bool
	mods       *module.Table
	Patches    []Patch
	// arenactl's copies of the rings, each as large as its ring, a
	// record at its slot's offset (Drain).
	freeBuf, ringBuf, shortBuf []byte
	// The records of the last drain, per ring and merged, kept for the
	// next one's (a drain's allocations were a third of its cost).
	freed, whole, short, merged []Record
	// heldBack are the samples the last drain read stamped after its
	// clock, given out by the next (Drain).
	heldBack []Record
	refs     []recRef
	// The sampler's shift as last seen, since when, and its most.
	shift, maxShift int
	shiftAt         time.Time
	pending         bool // this drain stopped at a record being written
	// Skipped are GOT entries left alone: they held neither the real
	// function nor their own object's PLT (an interposer's, or another
	// tool's), with why.
	Skipped []string
	// Notes say what was found of earlier, killed runs, and done with it.
	Notes []string
	// Stopped is how long every thread was stopped, in all.
	Stopped time.Duration
}

// NotSampledError: the process cannot be sampled safely.
type NotSampledError struct {
	Pid    int
	Reason string
}

func (e *NotSampledError) Error() string {
	return fmt.Sprintf("process %d cannot be profiled: %s", e.Pid, e.Reason)
}

func (e *NotSampledError) Is(target error) bool { return target == errkind.ErrNoSampler }

// Attach maps the sampler into t and points every loaded object's GOT
// entries for the malloc family at it.
func Attach(ctx context.Context, t *live.Target, o Options) (*Sampler, error) {
	if a := t.Arch(); a != ringMachine {
		// A live process is of arenactl's own machine (live refuses
		// others); this holds the image's machine to it all the same.
		return nil, fmt.Errorf("process %d: leaks' sampler has hooks for %s, not for this %s process: %w", t.Pid, ringMachine.ELFName, a.ELFName, errkind.ErrArch)
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.RingSlots == 0 {
		o.RingSlots = 1024
	}
	if o.ShortSlots == 0 {
		o.ShortSlots = 8192
	}
	if o.RingSlots&(o.RingSlots-1) != 0 || o.ShortSlots&(o.ShortSlots-1) != 0 {
		return nil, errors.New("sampler: RingSlots and ShortSlots must be powers of two")
	}
	st, err := t.Proc().ReadTaskStatus(t.Pid)
	if err != nil {
		return nil, t.Explain(err)
	}
	if st.Seccomp != 0 {
		return nil, &NotSampledError{Pid: t.Pid, Reason: "it runs under a seccomp filter, which may punish the syscalls a sample makes (gettid, getpid, process_vm_readv)"}
	}
	s := &Sampler{t: t, o: o, real: map[string]uint64{}, done: map[uint64]bool{}, parsed: map[*module.Module]bool{}}
	for name := range hooked {
		sym, ok := t.Libc.Lookup(name)
		if !ok {
			if name == "reallocarray" {
				continue // glibc before 2.26
			}
			return nil, fmt.Errorf("%s does not export %s", t.Libc.Path, name)
		}
		s.real[name] = sym.Value
	}
	if s.tramp, err = t.FindTrampoline(); err != nil {
		return nil, err
	}
	if err := t.Refresh(); err != nil {
		return nil, err
	}
	lefts, err := findLeftovers(t)
	if err != nil {
		return nil, err
	}
	s.mods = module.NewTable(t)
	// Everything read from files is read before anything is stopped.
	slots, err := s.newSlots()
	if err != nil {
		return nil, err
	}
	err = s.frozen(ctx, func(c *live.FrozenCaller) error {
		for _, l := range lefts {
			note, err := removeLeftover(t, c, l)
			if err != nil {
				return err
			}
			s.Notes = append(s.Notes, note)
		}
		if err := s.install(c); err != nil {
			return err
		}
		return s.patch(c, slots)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// frozen stops every thread, runs fn with a caller in one of them, and
// lets them all go (live.Target.CallFrozen).
func (s *Sampler) frozen(ctx context.Context, fn func(c *live.FrozenCaller) error) error {
	held, err := s.t.CallFrozen(ctx, s.o.Timeout, s.tramp, fn)
	s.Stopped += held
	return err
}

// newSlots lists the GOT entries of objects not looked at yet.
func (s *Sampler) newSlots() ([]slot, error) {
	var out []slot
	for _, m := range s.mods.Modules() {
		if m.Path == module.VDSO || s.parsed[m] {
			continue
		}
		s.parsed[m] = true
		sl, err := gotSlots(m)
		if err != nil {
			continue // a file that cannot be read: its calls go unsampled
		}
		for _, x := range sl {
			if !s.done[x.Addr] {
				out = append(out, x)
			}
		}
	}
	return out, nil
}

// install maps the image and the ring, fills in the configuration and
// makes the code executable. Runs frozen.
func (s *Sampler) install(c *live.FrozenCaller) error {
	imgSize := alignUp(uint64(bssOff+bssSize), pageSize)
	ringSize := alignUp(uint64(s.o.RingSlots)*recordSize, pageSize)
	freesSize := alignUp(freeSlots*freeRecSize, pageSize)
	s.size = imgSize + ringSize + freesSize + alignUp(uint64(s.o.ShortSlots)*shortSize, pageSize)
	base, err := implant.Map(c, s.size, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return fmt.Errorf("process %d: mapping %d bytes for the sampler: %w", s.t.Pid, s.size, err)
	}
	s.base, s.ring, s.slots = base, base+imgSize, uint64(s.o.RingSlots)
	s.frees = s.ring + ringSize
	s.shorts, s.shortSlots = s.frees+freesSize, uint64(s.o.ShortSlots)
	img := append([]byte(nil), image...)
	le := binary.LittleEndian
	le.PutUint64(img[symCfg+cfgEnabled:], 1)
	le.PutUint64(img[symCfg+cfgRingSlots:], s.slots)
	le.PutUint64(img[symCfg+cfgRing:], s.ring)
	le.PutUint64(img[symCfg+cfgFrees:], s.frees)
	le.PutUint64(img[symCfg+cfgShorts:], s.shorts)
	le.PutUint64(img[symCfg+cfgShortN:], s.shortSlots)
	self := procfs.Self()
	le.PutUint64(img[symCfg+cfgCreator:], uint64(self.Pid))
	le.PutUint64(img[symCfg+cfgCreator+8:], self.Start)
	le.PutUint64(img[symCfg+cfgImageSize:], s.size)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(s.t.Pid)))
	for i, d := range Draws(s.o.Rate) {
		le.PutUint64(img[symCfg+cfgDraws+8*i:], d)
	}
	le.PutUint64(img[symCfg+cfgDraw:], rng.Uint64())
	directJumps(img, base, s.real)
	if _, err := c.WriteAt(img, base); err != nil {
		return fmt.Errorf("writing the sampler: %w", err)
	}
	var w [8]byte
	for name, h := range hooked {
		le.PutUint64(w[:], s.real[name])
		if _, err := c.WriteAt(w[:], base+h.real); err != nil {
			return err
		}
	}
	// Every thread starts with one draw to go, not at zero (which would
	// sample each thread's first call).
	counters := make([]byte, 8*4096)
	for i := 0; i < 4096; i++ {
		d := -math.Log(1-rng.Float64()) * float64(s.o.Rate)
		le.PutUint64(counters[8*i:], uint64(d))
	}
	if _, err := c.WriteAt(counters, base+symCounters); err != nil {
		return err
	}
	if err := implant.Protect(c, base, dataOff, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		return fmt.Errorf("process %d: making the sampler's code executable failed (%v)", s.t.Pid, err)
	}
	return nil
}

// Draws is the sampler's table of intervals for a mean of rate bytes:
// the quantiles of the exponential distribution at the middles of
// nDraws equal slices of probability, scaled so that their mean is rate
// exactly. The sampler takes one at random for each interval. (Random
// draws, as the table held before, made a run's mean interval off by
// 1.6 % on average, every estimate of the run off with it.)
func Draws(rate uint64) []uint64 {
	q := make([]float64, nDraws)
	sum := 0.0
	for i := range q {
		q[i] = -math.Log1p(-(float64(i) + 0.5) / nDraws)
		sum += q[i]
	}
	out := make([]uint64, nDraws)
	for i := range q {
		out[i] = uint64(math.Round(q[i] * float64(rate) * nDraws / sum))
	}
	return out
}

// patch points the slots at the hooks. Runs frozen.
func (s *Sampler) patch(c *live.FrozenCaller, slots []slot) error {
	var w [8]byte
	for _, x := range slots {
		s.done[x.Addr] = true
		if _, err := c.ReadAt(w[:], x.Addr); err != nil {
			s.Skipped = append(s.Skipped, fmt.Sprintf("%s: %s's GOT entry at %#x cannot be read", x.Module, x.Name, x.Addr))
			continue
		}
		cur := binary.LittleEndian.Uint64(w[:])
		real, ok := s.real[x.Name]
		if !ok {
			continue
		}
		own, _ := s.mods.Lookup(cur)
		unbound := own != nil && own.Path == x.Module // lazy binding: its own PLT
		if cur != real && !unbound {
			s.Skipped = append(s.Skipped, fmt.Sprintf("%s: %s's GOT entry at %#x holds %#x, not libc's %s", x.Module, x.Name, x.Addr, cur, x.Name))
			continue
		}
		if len(s.Patches) == maxPatches {
			s.Skipped = append(s.Skipped, fmt.Sprintf("%s: %s's GOT entry at %#x: more than %d entries", x.Module, x.Name, x.Addr, maxPatches))
			continue
		}
		hook := s.base + hooked[x.Name].hook
		// Recorded in the sampler first, so that a later arenactl can
		// undo it if this one is killed.
		var e [24]byte
		binary.LittleEndian.PutUint64(e[0:], x.Addr)
		binary.LittleEndian.PutUint64(e[8:], cur)
		binary.LittleEndian.PutUint64(e[16:], hook)
		n := uint64(len(s.Patches))
		if _, err := c.WriteAt(e[:], s.base+symCfg+cfgPatches+24*n); err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(w[:], n+1)
		if _, err := c.WriteAt(w[:], s.base+symCfg+cfgNPatches); err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(w[:], hook)
		if _, err := c.WriteAt(w[:], x.Addr); err != nil {
			return fmt.Errorf("patching %s's GOT entry for %s at %#x: %w", x.Module, x.Name, x.Addr, err)
		}
		s.Patches = append(s.Patches, Patch{Module: x.Module, Name: x.Name, Slot: x.Addr, Orig: cur})
	}
	return nil
}

// Rescan patches the objects loaded since the last look (dlopen).
//
// It must cost the process nothing when nothing was loaded: the ranges are
// read from /proc/PID/maps (smaps would walk the page tables under the
// process's mmap lock every second; no thread's syscall file is read),
// and only objects not seen before are parsed.
func (s *Sampler) Rescan(ctx context.Context) error {
	if err := s.t.RefreshObjects(); err != nil {
		return err
	}
	s.markUnloaded()
	s.mods.Refresh()
	slots, err := s.newSlots()
	if err != nil || len(slots) == 0 {
		return err
	}
	return s.frozen(ctx, func(c *live.FrozenCaller) error { return s.patch(c, slots) })
}

// Stats are the sampler's counters.
type Stats struct {
	// Dropped: sampled allocations neither ring had room for. The
	// estimates are low by about their share.
	Dropped uint64
	// Shortened: sampled allocations written to the short ring
	// (Record.Short).
	Shortened uint64
	Untracked uint64 // sampled blocks whose free cannot be seen (FreesDropped included)
	// FreesDropped: frees of sampled blocks the free ring had no room for
	// (never, unless its bound is wrong): their blocks look held.
	FreesDropped uint64
	// Shift is how many times the mean interval is doubled now, MaxShift
	// the most it was since Attach.
	Shift, MaxShift int
	// Clock is the sampler's clock (Record.Stamp) as the drain began;
	// Pending: a ring was read up to a record still being written, and
	// the records after it wait for the next drain.
	Clock   uint64
	Pending bool
}

// Drain reads the records written since the last drain, frees and
// allocations in the order of their stamps. A record's Stack points into
// arenactl's copy of its ring, which the next Drain overwrites: the caller
// uses it before then, or copies it. (Copied per record, and the records
// sorted as whole structs, the drain cost about 10 µs a sample: a process
// with 16 threads allocating flat out on 2 CPUs, whose fair share of the
// CPUs was all arenactl had, outran it and half the samples were lost,
// issue 28.)
//
// The free ring is read, and its room given back, before the other: the
// sampler's bound on the frees it may have to hold assumes it.
func (s *Sampler) Drain() ([]Record, Stats, error) {
	le := binary.LittleEndian
	var fh [88]byte
	if _, err := s.t.ReadAt(fh[:], s.base+symCfg+cfgClock); err != nil {
		return nil, Stats{}, err
	}
	s.pending = false
	if s.freeBuf == nil {
		s.freeBuf = make([]byte, freeSlots*freeRecSize)
		s.ringBuf = make([]byte, s.slots*recordSize)
		s.shortBuf = make([]byte, s.shortSlots*shortSize)
	}
	frees := s.freed[:0]
	fhead := le.Uint64(fh[cfgFHead-cfgClock:])
	for s.ftail < fhead {
		first := s.ftail & (freeSlots - 1)
		n := min(fhead-s.ftail, freeSlots-first)
		buf := s.freeBuf[first*freeRecSize : (first+n)*freeRecSize]
		if _, err := s.t.ReadAt(buf, s.frees+first*freeRecSize); err != nil {
			return nil, Stats{}, err
		}
		for i := uint64(0); i < n; i++ {
			rec := buf[i*freeRecSize:]
			if le.Uint64(rec) != s.ftail+1 {
				fhead = s.ftail // reserved, not written yet
				s.pending = true
				break
			}
			frees = append(frees, Record{Kind: "free", Addr: le.Uint64(rec[8:]), Stamp: le.Uint64(rec[16:]), To: le.Uint64(rec[24:])})
			s.ftail++
		}
	}
	s.freed = frees
	var w [8]byte
	le.PutUint64(w[:], s.ftail)
	if _, err := s.t.WriteAt(w[:], s.base+symCfg+cfgFTail); err != nil {
		return nil, Stats{}, err
	}

	var hdr [96]byte
	if _, err := s.t.ReadAt(hdr[:], s.base+symCfg); err != nil {
		return nil, Stats{}, err
	}
	head := le.Uint64(hdr[cfgHead:])
	// A lost free (which the ring's size rules out) leaves its block
	// looking held, as an untracked one does.
	st := Stats{Dropped: le.Uint64(hdr[cfgDropped:]), Shortened: le.Uint64(fh[cfgShortened-cfgClock:]),
		Untracked:    le.Uint64(hdr[cfgUntracked:]) + le.Uint64(fh[cfgFDropped-cfgClock:]),
		FreesDropped: le.Uint64(fh[cfgFDropped-cfgClock:])}
	whole, err := s.drainRing(s.whole[:0], head, &s.tail, s.ring, s.ringBuf, s.slots, recordSize, cfgTail)
	if err != nil {
		return nil, st, err
	}
	short, err := s.drainRing(s.short[:0], le.Uint64(fh[cfgSHead-cfgClock:]), &s.stail, s.shorts, s.shortBuf, s.shortSlots, shortSize, cfgSTail)
	if err != nil {
		return nil, st, err
	}
	s.whole, s.short = whole, short
	st.Shift, st.MaxShift = s.ease(int(min(le.Uint64(fh[cfgShift-cfgClock:]), maxShift)), len(short))
	st.Clock, st.Pending = le.Uint64(fh[:]), s.pending
	// Samples stamped after the clock as the free ring was read wait for
	// the next drain: the frees before them may have come after that read
	// (a free stamped between the two reads of this drain, read in the
	// next), and a sample read before a free of an earlier block at its
	// address took that block for its own (internal/stackprof's after.go).
	// So every free stamped before a sample is read with it or earlier,
	// but for one whose thread was stopped in the middle of writing it.
	held := s.heldBack
	s.heldBack = nil
	whole, short = s.holdBack(whole, st.Clock), s.holdBack(short, st.Clock)
	return s.mergeByStamp(frees, held, whole, short), st, nil
}

// holdBack keeps the records of rs stamped at clock or before, and puts
// the others, their stacks copied out of the ring's buffer, in heldBack.
func (s *Sampler) holdBack(rs []Record, clock uint64) []Record {
	out := rs[:0]
	for _, r := range rs {
		if r.Stamp > clock {
			r.Stack = bytes.Clone(r.Stack)
			s.heldBack = append(s.heldBack, r)
			continue
		}
		out = append(out, r)
	}
	return out
}

// Clock is the sampler's clock now (what Record.Stamp counts).
func (s *Sampler) Clock() (uint64, error) {
	var w [8]byte
	if _, err := s.t.ReadAt(w[:], s.base+symCfg+cfgClock); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(w[:]), nil
}

// ease halves the sampler's mean interval again, if it had doubled it
// (shift, as read before this drain), when this drain found the short ring
// under 1/16 full and the interval has not changed for a second: the
// drains keep up. It returns the shift now and the most it was.
func (s *Sampler) ease(shift, short int) (int, int) {
	now := time.Now()
	if shift != s.shift {
		s.shift, s.shiftAt = shift, now
	}
	s.maxShift = max(s.maxShift, shift)
	if shift > 0 && short < int(s.shortSlots)/16 && now.Sub(s.shiftAt) >= time.Second {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], uint64(shift-1))
		// A rise the sampler makes meanwhile is undone: it rises
		// again, at once, if it still needs to.
		if _, err := s.t.WriteAt(w[:], s.base+symCfg+cfgShift); err == nil {
			s.shift, s.shiftAt = shift-1, now
		}
	}
	return s.shift, s.maxShift
}

// mergeByStamp puts the records of the three rings in the order of their
// stamps, into s.merged. Each ring's are nearly in order already (a slot
// is reserved right after the stamp is taken): their indices are sorted,
// not the records, which are moved once.
func (s *Sampler) mergeByStamp(parts ...[]Record) []Record {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	refs := s.refs[:0]
	for pi, p := range parts {
		for i := range p {
			refs = append(refs, recRef{p[i].Stamp, int32(pi), int32(i)})
		}
	}
	slices.SortStableFunc(refs, func(a, b recRef) int { return cmp.Compare(a.stamp, b.stamp) })
	out := slices.Grow(s.merged[:0], n)[:n]
	for i, r := range refs {
		out[i] = parts[r.part][r.i]
	}
	s.refs, s.merged = refs, out
	return out
}

type recRef struct {
	stamp   uint64
	part, i int32
}

// drainRing reads the records of one ring from *tail up to head, which
// it then gives back (the tail at cfg offset tailOff), into buf, arenactl's
// copy of the ring. The records written are read in one go (two where the
// ring wraps): reading them one by one made the drain slower than a busy
// process's samples come.
func (s *Sampler) drainRing(out []Record, head uint64, tail *uint64, ring uint64, copyOf []byte, slots, size uint64, tailOff uint64) ([]Record, error) {
	le := binary.LittleEndian
	for *tail < head {
		first := *tail & (slots - 1)
		n := min(head-*tail, slots-first)
		buf := copyOf[first*size : (first+n)*size]
		if _, err := s.t.ReadAt(buf, ring+first*size); err != nil {
			return out, err
		}
		for i := uint64(0); i < n; i++ {
			rec := buf[i*size : (i+1)*size]
			if le.Uint64(rec) != *tail+1 {
				head = *tail // reserved, not written yet: the rest next time
				s.pending = true
				break
			}
			out = append(out, parseRecord(rec))
			*tail++
		}
	}
	var w [8]byte
	le.PutUint64(w[:], *tail)
	_, err := s.t.WriteAt(w[:], s.base+symCfg+tailOff)
	return out, err
}

// markUnloaded marks the patches whose GOT entry is no longer in its
// object's mapping (found in the mappings last read): the object was
// unloaded (dlclose unmaps it, elf/dl-close.c's _dl_unmap). Its entries
// are forgotten as done, so that an object loaded again at the same place
// is patched as the new object it is.
func (s *Sampler) markUnloaded() {
	ms := s.t.Mappings()
	for i := range s.Patches {
		p := &s.Patches[i]
		if p.Unloaded {
			continue
		}
		if m, ok := maps.Find(ms, p.Slot); !ok || m.Path != p.Module {
			p.Unloaded = true
			delete(s.done, p.Slot)
		}
	}
}

// Left says what Detach left in the process.
type Left struct {
	Addr, Size uint64 // the sampler's memory, if kept (0: removed)
	Why        string
	Restored   int      // GOT entries put back
	Changed    []string // GOT entries something else rewrote meanwhile: left as they are
	Unloaded   []string // GOT entries of objects unloaded meanwhile (dlclose): gone with them
}

// Detach puts every GOT entry back, stops the slow paths and removes the
// sampler, unless a thread may still be executing in it: then it stays,
// inert (nothing points to it, its slow paths only call through), and Left
// says where. The entries of objects unloaded meanwhile are skipped (they
// are gone); one that is there and cannot be put back is said in Left, and
// the sampler, which it still points to, stays (its hooks, disabled, only
// call through to glibc).
func (s *Sampler) Detach(ctx context.Context) (Left, error) {
	var left Left
	busy := false
	err := s.frozen(ctx, func(c *live.FrozenCaller) error {
		// Freeze read the mappings once every thread had stopped (with no
		// per-thread /proc file): an object unloaded since the last
		// Rescan is known here, and none can go until the threads do.
		s.markUnloaded()
		var w [8]byte
		le := binary.LittleEndian
		var stuck []string
		for i := range s.Patches {
			p := &s.Patches[i]
			if p.Unloaded {
				left.Unloaded = append(left.Unloaded, fmt.Sprintf("%s: %s's GOT entry at %#x", p.Module, p.Name, p.Slot))
				continue
			}
			if _, err := c.ReadAt(w[:], p.Slot); err != nil {
				stuck = append(stuck, fmt.Sprintf("reading %s's GOT entry for %s at %#x: %v", p.Module, p.Name, p.Slot, err))
				continue
			}
			if cur := le.Uint64(w[:]); cur != s.base+hooked[p.Name].hook {
				left.Changed = append(left.Changed, fmt.Sprintf("%s: %s's GOT entry at %#x now holds %#x", p.Module, p.Name, p.Slot, cur))
				continue
			}
			le.PutUint64(w[:], p.Orig)
			if _, err := c.WriteAt(w[:], p.Slot); err != nil {
				stuck = append(stuck, fmt.Sprintf("restoring %s's GOT entry for %s at %#x: %v", p.Module, p.Name, p.Slot, err))
				continue
			}
			left.Restored++
		}
		le.PutUint64(w[:], 0)
		if _, err := c.WriteAt(w[:], s.base+symCfg+cfgEnabled); err != nil {
			return err
		}
		if len(stuck) > 0 {
			left.Addr, left.Size, left.Why = s.base, s.size, "GOT entries still point at it: "+strings.Join(stuck, "; ")
			return nil
		}
		busy = s.unmapIfIdle(c, &left)
		return nil
	})
	// A thread in a slow path when every thread was stopped leaves it
	// within microseconds once let go, and none can enter any more: look
	// again a few times.
	for try := 0; err == nil && busy && try < detachRetries; try++ {
		time.Sleep(time.Duration(try+1) * 10 * time.Millisecond)
		err = s.frozen(ctx, func(c *live.FrozenCaller) error {
			busy = s.unmapIfIdle(c, &left)
			return nil
		})
	}
	return left, err
}

// detachRetries is how many more times Detach looks for a moment when no
// thread runs in the sampler.
const detachRetries = 5

// unmapIfIdle removes the sampler if no thread can run in it; otherwise it
// says in left why it stays, and returns true. Runs frozen.
func (s *Sampler) unmapIfIdle(c *live.FrozenCaller, left *Left) bool {
	left.Addr, left.Size, left.Why = 0, 0, ""
	if why := s.busy(c); why != "" {
		left.Addr, left.Size, left.Why = s.base, s.size, why
		return true
	}
	if err := implant.Unmap(c, s.base, s.size); err != nil {
		left.Addr, left.Size, left.Why = s.base, s.size, fmt.Sprintf("munmap failed (%v)", err)
	}
	return false
}

// busy says why a thread may still run in the sampler, "" if none can:
// none is in a slow path, none is stopped in its code, and no stack holds
// a return address into it (a signal handler that interrupted a hook).
func (s *Sampler) busy(c *live.FrozenCaller) string { return busyAt(s.t, c, s.base) }

func busyAt(t *live.Target, c *live.FrozenCaller, base uint64) string {
	var w [8]byte
	if _, err := c.ReadAt(w[:], base+symCfg+cfgInflight); err != nil {
		return err.Error()
	}
	if n := binary.LittleEndian.Uint64(w[:]); n != 0 {
		return fmt.Sprintf("%d threads were in its slow path", n)
	}
	code := base + dataOff
	for _, th := range c.Threads() {
		if th.PC() >= base && th.PC() < code {
			return fmt.Sprintf("thread %d was executing it", th.Tid)
		}
		sp := th.SP()
		m, ok := findMapping(t, sp)
		if !ok {
			continue
		}
		stack := make([]byte, min(m.End-sp, 1<<20))
		n, _ := c.ReadAt(stack, sp)
		for i := 0; i+8 <= n; i += 8 {
			if v := binary.LittleEndian.Uint64(stack[i:]); v >= base && v < code {
				return fmt.Sprintf("thread %d's stack holds an address in its code (at %#x)", th.Tid, sp+uint64(i))
			}
		}
	}
	return ""
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }

func findMapping(t *live.Target, addr uint64) (maps.Mapping, bool) {
	return maps.Find(t.Mappings(), addr)
}

// Real is the address of libc's function a record's kind names (the
// allocator entry point a sample's stack starts in); 0 for none.
func (s *Sampler) Real(kind string) uint64 { return s.real[kind] }

func parseRecord(rec []byte) Record {
	le := binary.LittleEndian
	r := Record{Kind: kindNames[le.Uint32(rec[recKind:])], Addr: le.Uint64(rec[recAddr:]), Size: le.Uint64(rec[recSize:]),
		Old: le.Uint64(rec[recOld:]), OldSize: le.Uint64(rec[recOldSize:]), Stamp: le.Uint64(rec[recStamp:]), Tid: int(uint32(le.Uint64(rec[recTid:]))),
		Moved: uint32(le.Uint64(rec[recTid:]) >> 32), Untracked: le.Uint32(rec[recFlags:])&1 != 0,
		Short: len(rec) < recordSize, Thin: int(le.Uint32(rec[recFlags:]) >> 8 & 0xff), Shift: int(le.Uint32(rec[recFlags:]) >> 16 & 0xff)}
	r.Regs.SetPCOf(ringMachine, le.Uint64(rec[recPC:]))
	r.Regs.SetSPOf(ringMachine, le.Uint64(rec[recSP:]))
	// The ring's order of the callee-saved registers, which the hooks'
	// code writes.
	for i, reg := range ringRegs {
		r.Regs[reg] = le.Uint64(rec[recRegs+8*i:])
	}
	if n := min(le.Uint64(rec[recStackLen:]), uint64(len(rec)-recStack)); n > 0 {
		r.Stack = rec[recStack : recStack+n : recStack+n]
	}
	return r
}

// RingSlots is how many records the ring holds.
func (s *Sampler) RingSlots() int { return int(s.slots) }

// ShortSlots is how many records the ring of short records holds.
func (s *Sampler) ShortSlots() int { return int(s.shortSlots) }

// hookEnds are the hooks' offsets in order, so that each hook's code is
// known to end where the next one (or the text) starts.
var hookEnds = func() []uint64 {
	var out []uint64
	for _, h := range hooked {
		out = append(out, h.hook)
	}
	out = append(out, dataOff)
	slices.Sort(out)
	return out
}()
