package live

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/arenactl/arenactl/internal/arch"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/implant"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// An Image is a copy-on-write image of a live process: every thread is
// stopped for as long as it takes to record their registers and to fork
// the address space from one of them (ptrace.CloneImage: raw syscalls in a
// call site, no code of the program's), then the process runs on while the
// image, a stopped copy of its memory at that instant, is read at leisure.
// The freeze lasts as long as the kernel takes to copy the page tables
// (about 10 to 25 ms per GiB of resident memory), not as long as a walk or
// a dump.
//
// The image is not a child of the target (it is reparented to init) and
// runs nothing but a poll loop; it exits by itself when arenactl stops
// renewing its lease (ptrace.ImageTicks polls of 100 ms), so a killed
// arenactl leaves nothing behind. Its oom_score_adj is 1000: should the
// pages the process writes meanwhile (each is copied once, charged to its
// cgroup) exhaust memory anyway, the OOM killer takes the image first.
type Image struct {
	t        *Target
	Pid      int // the image's pid in arenactl's pid namespace
	pidfd    int
	proc     *procfs.Proc // its /proc directory, held
	mem      *os.File
	site     uint64 // the call site's address, whose copy holds the heartbeat
	siteSize uint64
	threads  []debuggee.Thread
	frozen   []debuggee.Thread
	mappings []maps.Mapping
	// Stopped is how long every thread of the process was stopped.
	Stopped time.Duration
	// Cloned is how long the clone syscall and its helper took, of that.
	Cloned time.Duration
	// Room is the memory that could still be charged when it was made.
	Room procfs.MemoryRoom
	// LeftOut are the mappings the image was made without (marked
	// MADV_DONTFORK for the clone, see ptrace.CloneImage): reading them
	// from the image fails.
	LeftOut []maps.Range
	// Notes say which call sites of earlier, killed runs were removed
	// while the process was stopped, or kept and why.
	Notes []string

	stop     chan struct{}
	beatDone sync.WaitGroup
	closed   bool
}

// ImageUnavailableError: no copy-on-write image can be made of the process
// safely, and none was. Reason says why. Found before anything is stopped
// (CheckImage), or by the image routine with every thread stopped (the
// kernel refused a clone, or the process is a child subreaper): nothing
// was made then, and the threads ran on.
type ImageUnavailableError struct {
	Pid    int
	Reason string
}

func (e *ImageUnavailableError) Error() string {
	return fmt.Sprintf("process %d: no copy-on-write image: %s", e.Pid, e.Reason)
}

func (e *ImageUnavailableError) Is(target error) bool { return target == errkind.ErrNoImage }

// imageHeartbeat is how often arenactl renews the image's lease: well
// inside the lease (ptrace.ImageTicks × 100 ms), so that a loaded machine
// does not end an image arenactl still reads.
const imageHeartbeat = 200 * time.Millisecond

// imageCallLimit is far beyond what copying any process's page tables takes.
const imageCallLimit = 10 * time.Minute

// CheckImage says whether an image of the process can be made safely, from
// what /proc and the cgroup show now (nothing is stopped). leaveOut are the
// mappings the image is to be made without (see Image): their pages are
// never shared with it, so never copied.
func (t *Target) CheckImage(leaveOut ...maps.Range) (procfs.MemoryRoom, error) {
	unavailable := func(format string, a ...any) (procfs.MemoryRoom, error) {
		return procfs.MemoryRoom{}, &ImageUnavailableError{Pid: t.Pid, Reason: fmt.Sprintf(format, a...)}
	}
	st, err := t.Proc().ReadTaskStatus(t.Pid)
	if err != nil {
		return procfs.MemoryRoom{}, t.proc.Explain(err)
	}
	if st.Seccomp != 0 {
		// A filter may kill the whole process for a clone it forbids.
		return unavailable("it runs under a seccomp filter, which may forbid or punish the clone")
	}
	if len(st.NSpid) > 1 && st.NSpid[len(st.NSpid)-1] == 1 {
		return unavailable("it is the init of its pid namespace: the image would be left to it to reap")
	}
	if os.Geteuid() != 0 {
		if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && strings.TrimSpace(string(b)) != "0" {
			return unavailable("the image is not arenactl's descendant, and kernel.yama.ptrace_scope lets only root read it")
		}
	}
	room, err := t.Proc().ReadMemoryRoom()
	if err != nil {
		return procfs.MemoryRoom{}, t.proc.Explain(err)
	}
	// Every page the process writes while the image lives is copied: at
	// worst all its anonymous memory, and the image's page tables.
	need := st.RssAnon + st.VmPTE
	if room.Bytes < need {
		need -= min(need, t.leftOutResident(leaveOut))
	}
	if room.Bytes < need {
		where := "the machine has"
		if room.Limit != "" {
			where = fmt.Sprintf("its cgroup %s has", room.Limit)
		}
		return unavailable("%s %s of memory left, less than the %s of anonymous memory and page tables the process might write while it is read", where, mib(room.Bytes), mib(need))
	}
	return room, nil
}

// leftOutResident is how much of the process's RSS lies in the mappings an
// image would leave out: none where the kernel cannot leave any out (no
// PROCMAP_QUERY, which the image routine needs) or cannot tell.
func (t *Target) leftOutResident(leaveOut []maps.Range) uint64 {
	if len(leaveOut) == 0 {
		return 0
	}
	if _, _, err := maps.QueryProc(t.Proc(), leaveOut[0].Start); err != nil {
		return 0
	}
	pm, err := t.Proc().OpenPagemap()
	if err != nil {
		return 0
	}
	defer pm.Close()
	var n uint64
	for _, sp := range leaveOut {
		lo, hi, ok := ptrace.Middle(sp)
		if !ok {
			continue
		}
		r, err := pm.Resident(lo, hi)
		if err != nil {
			return 0
		}
		n += r
	}
	return n
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// Image stops every thread, makes the image from one of them and lets them
// all go. Everything that needs no stopped thread (the checks, finding the
// signal trampoline the call site falls back on) is done first. The
// image's mappings are the process's as the freeze found them.
//
// leaveOut names mappings the reader of the image will not read (memory
// the allocator does not own): each is left out of the image if it is, as
// the freeze finds it, exactly one private anonymous read-write mapping
// that holds no thread's stack pointer or thread pointer, so that the
// clone copies no page table of it. Im.LeftOut says which were.
func (t *Target) Image(ctx context.Context, timeout time.Duration, leaveOut ...maps.Range) (*Image, error) {
	// The routine takes so many (the biggest come first); the room check
	// counts only those.
	leaveOut = leaveOut[:min(len(leaveOut), ptrace.MaxLeaveOut)]
	room, err := t.CheckImage(leaveOut...)
	if err != nil {
		return nil, err
	}
	tramp, err := ptrace.FindTrampoline(t.proc)
	if err != nil {
		return nil, &ImageUnavailableError{Pid: t.Pid, Reason: err.Error()}
	}
	// Leftover call sites are looked for before anything is stopped; only
	// when some exist are they looked at again (they may have changed)
	// while every thread is.
	sites, _ := t.proc.FindSites()
	lookForSites := len(sites) > 0
	var im *Image
	var nsPid int
	var site, size uint64
	var freezeErr error // explained by Freeze itself
	err = waitOutSites(ctx, func() (bool, error) {
		f, err := t.Freeze(ctx, timeout)
		if err != nil {
			freezeErr = err
			return false, err
		}
		// The threads as the freeze stopped them: the same list as the
		// target's own Threads, without their extended state unless asked.
		frozen := f.threadList(t.ImageXState)
		im = &Image{t: t, Room: room, pidfd: -1, frozen: frozen, threads: frozen, mappings: t.mappings}
		var atSites bool
		var cloneErr error
		nsPid, site, size, atSites, cloneErr = im.clone(ctx, f, tramp, timeout, lookForSites, im.leavable(leaveOut))
		held, thawErr := f.Thaw()
		im.Stopped = held
		return atSites && thawErr == nil, errors.Join(cloneErr, thawErr)
	})
	if freezeErr != nil {
		return nil, freezeErr
	}
	if err != nil {
		return nil, t.explain(ctx, err)
	}
	im.site, im.siteSize = site, size
	if err := im.attach(nsPid); err != nil {
		return nil, err
	}
	return im, nil
}

// leavable is what of want may be left out of the image, with every
// thread stopped: whole mappings as the freeze read them, private,
// anonymous, read-write, holding no thread's stack or TLS (the walk reads
// the tcache pointer there).
func (im *Image) leavable(want []maps.Range) []maps.Range {
	if len(want) == 0 {
		return nil
	}
	exact := map[maps.Range]bool{}
	for _, m := range im.mappings {
		if m.Perms == "rw-p" && (m.Path == "" || strings.HasPrefix(m.Path, "[anon:")) {
			exact[maps.Range{Start: m.Start, End: m.End}] = true
		}
	}
	var out []maps.Range
next:
	for _, sp := range want {
		if !exact[sp] {
			continue
		}
		for _, th := range im.frozen {
			for _, p := range []uint64{th.SP(), th.TP()} {
				if p >= sp.Start && p < sp.End {
					continue next
				}
			}
		}
		out = append(out, sp)
	}
	return out
}

// clone runs the image routine in the first thread that can take a call
// site. It returns the image's pid in the target's namespace and the site's
// address.
//
// atSites is true when no thread could take it because each is still in an
// earlier run's call site (every error an *ptrace.AtCallSiteError).
func (im *Image) clone(ctx context.Context, f *Frozen, tramp uint64, timeout time.Duration, sites bool, leave []maps.Range) (pid int, site, size uint64, atSites bool, err error) {
	var errs []error
	// Never abandoned, not even on SIGINT: a thread taken back in the
	// middle of the routine would keep its mask of every signal blocked
	// and leave the helper unreaped. The routine ends by itself, as soon
	// as the kernel has copied the page tables.
	lim := ptrace.CallLimits{Soft: imageCallLimit, Hard: imageCallLimit}
	for _, th := range f.threads {
		th.SetTrampoline(tramp)
		start := time.Now()
		pid, left, err := th.CloneImage(lim, leave)
		im.Cloned = time.Since(start)
		im.LeftOut = left
		base, size, _ := th.Site()
		if err == nil {
			if sites {
				im.Notes = removeIdleSites(f, &FrozenCaller{f: f, th: th, tramp: tramp, lim: lim}, base)
			}
			return pid, base, size, false, nil
		}
		var clone *ptrace.CloneError
		if errors.As(err, &clone) {
			// The kernel refused: nothing was made, nothing is left.
			return 0, 0, 0, false, &ImageUnavailableError{Pid: im.t.Pid, Reason: clone.Error()}
		}
		if errors.Is(err, ptrace.ErrSubreaper) {
			return 0, 0, 0, false, &ImageUnavailableError{Pid: im.t.Pid, Reason: ptrace.ErrSubreaper.Error()}
		}
		errs = append(errs, err)
		var atSite *ptrace.AtCallSiteError
		if !errors.As(err, &atSite) {
			return 0, 0, 0, false, errors.Join(errs...) // the call was tried: do not try another thread
		}
	}
	return 0, 0, 0, len(errs) > 0, errors.Join(errs...)
}

// attach finds the image from arenactl's side, checks it is the one made
// (its copy of the call site names this arenactl), and starts its lease.
func (im *Image) attach(nsPid int) (err error) {
	hostPid, err := im.hostPid(nsPid)
	if err != nil {
		return err
	}
	fd, err := unix.PidfdOpen(hostPid, 0)
	if err != nil {
		return fmt.Errorf("process %d: its image %d: %w", im.t.Pid, hostPid, err)
	}
	im.Pid, im.pidfd = hostPid, fd
	defer func() {
		if err != nil {
			im.Close()
		}
	}()
	// Its /proc directory held, opened after the pidfd: should the image
	// have died and its pid gone to another process meanwhile, the check
	// of the call site's copy below, read through it, fails.
	if im.proc, err = procfs.OpenProc(hostPid); err != nil {
		return fmt.Errorf("process %d: its image %d: %w", im.t.Pid, hostPid, err)
	}
	// Read-write: the heartbeat is written into the image's own copy of
	// the call site.
	if im.mem, err = os.OpenFile(im.proc.Path("mem"), os.O_RDWR, 0); err != nil {
		return fmt.Errorf("process %d: its image %d: %w", im.t.Pid, hostPid, err)
	}
	var hdr [ptrace.SiteHeaderSize]byte
	if _, err := im.mem.ReadAt(hdr[:], int64(im.site)); err != nil {
		return fmt.Errorf("process %d: reading its image %d: %w", im.t.Pid, hostPid, err)
	}
	if !ptrace.MadeBySelf(hdr[:]) {
		return fmt.Errorf("process %d: process %d is not the image made", im.t.Pid, hostPid)
	}
	// Chosen first by the OOM killer, in the cgroup and on the machine.
	os.WriteFile(im.proc.Path("oom_score_adj"), []byte("1000"), 0)
	im.stop = make(chan struct{})
	im.beatDone.Add(1)
	go im.heartbeat()
	return nil
}

// hostPid translates the image's pid from the target's pid namespace into
// arenactl's: the same number when both share one, else the process in the
// target's namespace whose innermost id it is.
func (im *Image) hostPid(nsPid int) (int, error) {
	mine, err1 := os.Readlink("/proc/self/ns/pid")
	theirs, err2 := os.Readlink(im.t.Proc().Path("ns/pid"))
	if err1 == nil && err2 == nil && mine == theirs {
		return nsPid, nil
	}
	pids, err := procfs.Pids()
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		st, err := procfs.ReadTaskStatus(pid, pid)
		if err != nil || len(st.NSpid) < 2 || st.NSpid[len(st.NSpid)-1] != nsPid {
			continue
		}
		if ns, err := os.Readlink(procfs.Path(pid, "ns/pid")); err == nil && ns == theirs {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("process %d: its image (pid %d in its namespace) was not found", im.t.Pid, nsPid)
}

// heartbeat renews the image's lease until Close.
func (im *Image) heartbeat() {
	defer im.beatDone.Done()
	tick := time.NewTicker(imageHeartbeat)
	defer tick.Stop()
	var beat [8]byte
	for n := uint64(1); ; n++ {
		binary.LittleEndian.PutUint64(beat[:], n)
		// A failed write is tried again at the next tick: the lease
		// allows many.
		unix.Pwrite(int(im.mem.Fd()), beat[:], int64(im.site+ptrace.ImageBeatOffset))
		select {
		case <-im.stop:
			return
		case <-tick.C:
		}
	}
}

// ReadAt reads the image's memory: the process's as it was when the image
// was made.
//
// Through /proc/PID/mem, never process_vm_readv: that one pins the pages
// it reads (FOLL_PIN), and the kernel unshares a copy-on-write page before
// it lets it be pinned, so reading the image through it copied every page
// read (a walk of a 4 GiB heap took three times as long, and the copies
// are charged to the process's cgroup). /proc/PID/mem only references
// them.
func (im *Image) ReadAt(b []byte, addr uint64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := im.mem.ReadAt(b, int64(addr))
	if err != nil {
		if !im.alive() {
			return n, fmt.Errorf("reading %d bytes at %#x: %w", len(b), addr, ErrImageGone)
		}
		return n, fmt.Errorf("reading %d bytes at %#x in the image of process %d: %w", len(b), addr, im.t.Pid, err)
	}
	return n, nil
}

// ErrImageGone: the image ended before it was read through (killed, or its
// lease ran out while arenactl was stopped).
var ErrImageGone = errkind.ErrImageGone

func (im *Image) alive() bool {
	if im.pidfd < 0 {
		return false
	}
	// Signal 0 checks permission too: the image of another user's process
	// answers EPERM to an arenactl without CAP_KILL (a least-privilege
	// container), and is alive; only ESRCH says it ended.
	err := unix.PidfdSendSignal(im.pidfd, 0, nil, 0)
	return err == nil || err == unix.EPERM
}

// Gone returns ErrImageGone when the image ended before Close (killed,
// or its lease ran out): reads of it failed from then on, and what a walk
// or a scan made of them is short of the process's memory.
func (im *Image) Gone() error {
	if !im.closed && !im.alive() {
		return ErrImageGone
	}
	return nil
}

// Process is the imaged process.
func (im *Image) Process() debuggee.Process { return im.t.Process() }

// Mappings are the process's mappings as the freeze found them.
func (im *Image) Mappings() []maps.Mapping { return im.mappings }

// Threads are the process's threads with their registers at the freeze.
func (im *Image) Threads() []debuggee.Thread { return im.threads }

// Arch is the process's.
func (im *Image) Arch() *arch.Arch { return im.t.arch }

// FrozenThreads are the same with their extended state.
func (im *Image) FrozenThreads() []debuggee.Thread { return im.frozen }

// OpenFile opens a mapped file through the process.
func (im *Image) OpenFile(m maps.Mapping) (*os.File, error) { return im.t.OpenFile(m) }

// Refresh reads the image's mappings again with their smaps counters, less
// the call site the image was made from, plus the mappings left out of it.
// The counters are the image's own, not the process's: the pages it shares
// with the process count as shared (Private_Dirty near 0, Pss half of Rss)
// and its file pages were never faulted in; a snapshot records the
// process's instead (inspect.Snapshot).
func (im *Image) Refresh() error {
	ms, err := maps.ReadProc(im.proc, true)
	if err != nil {
		if !im.alive() {
			return ErrImageGone
		}
		return err
	}
	// The site's pages may have merged with a neighbour's mapping: only
	// they are cut out.
	var out []maps.Mapping
	lo, hi := im.site, im.site+im.siteSize
	for _, m := range ms {
		if m.End <= lo || m.Start >= hi {
			out = append(out, m)
			continue
		}
		if m.Start < lo {
			before := m
			before.End = lo
			out = append(out, before)
		}
		if m.End > hi {
			after := m
			after.Start = hi
			out = append(out, after)
		}
	}
	// The mappings left out of the image are the process's still: listed
	// as the freeze found them (no counters), with nothing to read. Only
	// their middle was left out; the image's pieces of their ends go.
	kept := out[:0]
	for _, m := range out {
		if !overlapsAny(im.LeftOut, m.Start, m.End) {
			kept = append(kept, m)
		}
	}
	out = kept
	for _, m := range im.mappings {
		for _, sp := range im.LeftOut {
			if m.Start == sp.Start && m.End == sp.End {
				out = append(out, m)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	sps := map[int]uint64{}
	for _, th := range im.threads {
		sps[th.Tid] = th.SP()
	}
	maps.Classify(out, maps.Hints{ExePath: im.t.Exe, StackPointers: sps})
	im.mappings = out
	return nil
}

// Proc is the image's /proc directory, held: its pagemap tells the image's
// resident pages.
func (im *Image) Proc() *procfs.Proc { return im.proc }

// Close ends the image and waits (up to a second) for it to be gone.
func (im *Image) Close() error {
	if im.closed {
		return nil
	}
	im.closed = true
	if im.stop != nil {
		close(im.stop)
		im.beatDone.Wait()
	}
	if im.pidfd >= 0 {
		unix.PidfdSendSignal(im.pidfd, unix.SIGKILL, nil, 0)
		fds := []unix.PollFd{{Fd: int32(im.pidfd), Events: unix.POLLIN}}
		unix.Poll(fds, 1000)
		unix.Close(im.pidfd)
		im.pidfd = -1
	}
	if im.mem != nil {
		im.mem.Close()
	}
	im.proc.Close()
	return nil
}

func (im *Image) String() string { return "image " + strconv.Itoa(im.Pid) }

var _ debuggee.Target = (*Image)(nil)

// Site is the address of the call site the image was made from (in the
// process, removed by now; in the image, its copy holds the heartbeat).
func (im *Image) Site() uint64 { return im.site }

// removeIdleSites removes, through c while every thread is stopped, the
// call sites earlier runs left that nothing can run in (implant.KeepSites):
// here, no stopped thread is in one, and one that holds what an injected
// call made (a buffer, a FILE) is left to an injected run, which removes
// those with glibc's help. own is this run's site.
func removeIdleSites(f *Frozen, c *FrozenCaller, own uint64) []string {
	sites, err := f.t.proc.FindSites()
	if err != nil {
		return nil
	}
	sites = slices.DeleteFunc(sites, func(si ptrace.SiteInfo) bool { return si.Addr == own })
	why := implant.KeepSites(sites, func(si *ptrace.SiteInfo) string {
		if si.HoldsObjects() {
			return "it holds what an injected call made (an injected run removes it)"
		}
		for _, ft := range f.threads {
			if r := ft.Regs(); si.Contains(ptrace.PC(&r)) {
				return fmt.Sprintf("thread %d is still executing in it", ft.Tid)
			}
		}
		return ""
	})
	var notes []string
	for i, si := range sites {
		if why[i] == "" {
			err := implant.Unmap(c, si.Addr, si.Size)
			if err == nil {
				notes = append(notes, fmt.Sprintf("removed the %d-byte call site at %#x an earlier arenactl (pid %d) left", si.Size, si.Addr, si.Creator))
				continue
			}
			why[i] = fmt.Sprintf("munmap failed (%v)", err)
		}
		notes = append(notes, implant.Kept(&si, why[i]))
	}
	return notes
}

func overlapsAny(spans []maps.Range, start, end uint64) bool {
	for _, sp := range spans {
		if sp.Start < end && start < sp.End {
			return true
		}
	}
	return false
}
