package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/maps"
)

// A copy-on-write image of the process is a child made by a raw clone
// syscall (no glibc fork: no atfork handlers run, no allocator lock is
// taken), whose memory is the process's at that instant while the process
// runs on. The routine below runs in one borrowed thread, every other
// thread being stopped, and makes it in two steps:
//
//  1. the thread blocks every signal and vforks a helper that shares its
//     memory (CLONE_VM|CLONE_VFORK, exit signal 0: the program is not
//     notified), then reaps it with wait4(__WALL) and puts its mask back;
//  2. the helper clones the image (a plain fork: the page tables are copied
//     then) and exits at once, so the image is reparented to init, which
//     reaps it when it ends: the target is left with no child of ours.
//
// The copy of the page tables is the whole stop, and it grows with every
// resident page of the process, not only the heap's: a database's buffer
// pool (anonymous memory the allocator never sees) can make it ten times
// longer than the heap alone would. So the routine can leave mappings the
// caller names out of the image: with signals blocked, before the clone,
// it marks each MADV_DONTFORK, and after the clone (made or refused) it
// marks it MADV_DOFORK again, in the same run: nothing between the two
// depends on arenactl, so a killed arenactl cannot leave a mark behind.
// It must never clear a mark the program set itself, and /proc shows no
// such mark without walking every page table (smaps). So it marks only the
// middle of a mapping (2 MiB in from each end: no huge page is split) and
// asks the kernel (the PROCMAP_QUERY ioctl on /proc/self/maps, Linux 6.11)
// where the mapping ends: the mapping split in three only if the mark was
// new, and only then is it undone (which merges the three back). A mapping
// already marked stays whole and untouched; one whose bounds moved since
// the caller looked, or a kernel without the ioctl, leaves it in.
//
// Orphans go to the nearest child subreaper (prctl PR_SET_CHILD_SUBREAPER)
// above their parent instead, and the helper's parent is the process: if
// it is a subreaper itself, the image would become its child, a SIGCHLD
// and a zombie for it to reap. The routine asks first (PR_GET_...) and
// makes nothing then (ErrSubreaper). A subreaper further up (a service
// manager, a container's shim) adopts the image and reaps it like any
// orphan.
//
// The image runs no code of the program's. It inherits the blocked mask
// (no handler of the program's can run in it), and loops in a 100 ms ppoll
// on nothing, watching a heartbeat word that arenactl increments in the
// image's own copy of the call site. If the word stays unchanged for
// imageLease, because arenactl died, hung or was stopped, the image
// exits by itself. arenactl ends it with SIGKILL when done.
const (
	hdrImagePid = 0x70 // the image's pid in the target's pid namespace, or -errno (written by the helper)
	hdrBeat     = 0x78 // the heartbeat, incremented by arenactl in the image
	hdrSigAll   = 0x80 // a sigset_t with every signal
	hdrSigOld   = 0x88 // the borrowed thread's own mask, while the routine runs
	hdrBeatTs   = 0x90 // struct timespec: the image's poll interval
	hdrReaper   = 0xa0 // int: the process is a child subreaper (written by prctl)

	// The mappings to leave out of the image (written by arenactl before
	// the call): a count, the ioctl's struct procmap_query, then per
	// mapping its start, end, the middle marked (start, length) and a word
	// the routine sets to 1 when it marked the middle itself.
	leaveCount   = 0x400
	leaveQuery   = 0x410 // struct procmap_query (maps.QuerySize bytes)
	leaveEntries = 0x480
	leaveEntry   = 0x30
	// MaxLeaveOut is how many mappings one image can leave out.
	MaxLeaveOut = (0x1000 - leaveEntries) / leaveEntry

	madvDontfork = 10
	madvDofork   = 11
	leaveAlign   = 2 << 20
)

// The query struct must fit before the entries (a compile-time check).
const _ = uint(leaveEntries - leaveQuery - maps.QuerySize)

// hdrMapsPath holds the path the routine opens, NUL-terminated.
const hdrMapsPath = 0xc0

const mapsPath = "/proc/self/maps\x00"

// ImageBeatOffset is where, from the call site's start, the image's
// heartbeat word is (in the image's own copy of the site).
const ImageBeatOffset = hdrBeat

// ImageTicks is how many 100 ms polls the image waits without a change of
// the heartbeat before it exits: the lease arenactl must renew.
const ImageTicks = 20

const (
	cloneVM       = 0x100
	cloneVfork    = 0x4000
	cloneUntraced = 0x800000
	sigchld       = 17
	waitAll       = 0x40000000 // __WALL
	sysPrctl      = 157
	prGetReaper   = 37 // PR_GET_CHILD_SUBREAPER
)

// asm is a minimal x86-64 assembler for the routine: raw bytes,
// rip-relative operands and forward/backward jumps by label.
type asm struct {
	base   uint64 // address of b[0]
	b      []byte
	labels map[string]int
	fix    map[int]string // offset of a rel32 -> label
}

func newAsm(base uint64) *asm {
	return &asm{base: base, labels: map[string]int{}, fix: map[int]string{}}
}

func (a *asm) emit(b ...byte) { a.b = append(a.b, b...) }

// rip emits op, a disp32 to target, then imm.
func (a *asm) rip(target uint64, imm []byte, op ...byte) {
	end := a.base + uint64(len(a.b)+len(op)+4+len(imm))
	a.b = append(a.b, op...)
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(int64(target)-int64(end))))
	a.b = append(a.b, imm...)
}

func (a *asm) label(name string) { a.labels[name] = len(a.b) }

// jump emits op (a rel32 jump) to label.
func (a *asm) jump(label string, op ...byte) {
	a.b = append(a.b, op...)
	a.fix[len(a.b)] = label
	a.b = append(a.b, 0, 0, 0, 0)
}

func (a *asm) imm32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func (a *asm) done() []byte {
	for at, l := range a.fix {
		to, ok := a.labels[l]
		if !ok {
			panic("ptrace: no label " + l)
		}
		binary.LittleEndian.PutUint32(a.b[at:], uint32(int32(to-(at+4))))
	}
	return a.b
}

// imageRoutine assembles the routine at pc; site is the call site's base.
// It is called like a function and returns, in rax, the image's pid or a
// negative errno.
func imageRoutine(site, pc uint64) []byte {
	a := newAsm(pc)
	sigprocmask := func(set, old uint64) {
		a.emit(0xb8, 14, 0, 0, 0) // mov eax, SYS_rt_sigprocmask
		a.emit(0xbf, 2, 0, 0, 0)  // mov edi, SIG_SETMASK
		a.rip(set, nil, 0x48, 0x8d, 0x35)
		if old != 0 {
			a.rip(old, nil, 0x48, 0x8d, 0x15) // lea rdx, [rip+old]
		} else {
			a.emit(0x31, 0xd2) // xor edx, edx
		}
		a.emit(0x41, 0xba, 8, 0, 0, 0) // mov r10d, 8
		a.emit(0x0f, 0x05)
	}
	clone := func(flags uint32) {
		a.emit(0xb8, 56, 0, 0, 0) // mov eax, SYS_clone
		a.emit(0xbf)              // mov edi, flags
		a.emit(a.imm32(flags)...)
		a.emit(0x31, 0xf6)       // xor esi, esi: the same stack (nothing is pushed)
		a.emit(0x31, 0xd2)       // xor edx, edx
		a.emit(0x45, 0x31, 0xd2) // xor r10d, r10d
		a.emit(0x45, 0x31, 0xc0) // xor r8d, r8d
		a.emit(0x0f, 0x05)
		a.emit(0x48, 0x85, 0xc0) // test rax, rax
	}

	// The borrowed thread. Not in a child subreaper (see above): it
	// returns 0 and the flag says why. A kernel that cannot answer
	// (before 3.4) has no subreapers.
	a.emit(0xb8, sysPrctl, 0, 0, 0)              // mov eax, SYS_prctl
	a.emit(0xbf, prGetReaper, 0, 0, 0)           // mov edi, PR_GET_CHILD_SUBREAPER
	a.rip(site+hdrReaper, nil, 0x48, 0x8d, 0x35) // lea rsi, [rip+reaper]
	a.emit(0x0f, 0x05)                           // syscall
	a.emit(0x48, 0x85, 0xc0)                     // test rax, rax
	a.jump("start", 0x0f, 0x88)                  // js start
	a.rip(site+hdrReaper, nil, 0x8b, 0x05)       // mov eax, [rip+reaper]
	a.emit(0x85, 0xc0)                           // test eax, eax
	a.jump("start", 0x0f, 0x84)                  // jz start
	a.emit(0x31, 0xc0)                           // xor eax, eax
	a.emit(0xc3)                                 // ret
	a.label("start")
	sigprocmask(site+hdrSigAll, site+hdrSigOld)
	leaveOut(a, site)
	clone(cloneVM | cloneVfork | cloneUntraced) // exit signal 0
	a.jump("helper", 0x0f, 0x84)                // jz helper
	a.jump("unmask", 0x0f, 0x88)                // js unmask (rax = -errno)
	a.emit(0x49, 0x89, 0xc4)                    // mov r12, rax
	a.label("wait")
	a.emit(0xb8, 61, 0, 0, 0) // mov eax, SYS_wait4
	a.emit(0x4c, 0x89, 0xe7)  // mov rdi, r12
	a.emit(0x31, 0xf6)        // xor esi, esi
	a.emit(0xba)              // mov edx, __WALL
	a.emit(a.imm32(waitAll)...)
	a.emit(0x45, 0x31, 0xd2)                       // xor r10d, r10d
	a.emit(0x0f, 0x05)                             // syscall
	a.emit(0x48, 0x83, 0xf8, 0xfc)                 // cmp rax, -EINTR
	a.jump("wait", 0x0f, 0x84)                     // je wait
	a.rip(site+hdrImagePid, nil, 0x48, 0x8b, 0x05) // mov rax, [rip+imagepid]
	a.label("unmask")
	a.emit(0x49, 0x89, 0xc4) // mov r12, rax
	putBack(a, site)
	sigprocmask(site+hdrSigOld, 0)
	a.emit(0x4c, 0x89, 0xe0) // mov rax, r12
	a.emit(0xc3)             // ret

	// The helper: it shares the process's memory, so what it writes the
	// borrowed thread reads.
	a.label("helper")
	clone(sigchld | cloneUntraced)
	a.jump("image", 0x0f, 0x84)                    // jz image
	a.rip(site+hdrImagePid, nil, 0x48, 0x89, 0x05) // mov [rip+imagepid], rax
	a.emit(0xb8, 60, 0, 0, 0)                      // mov eax, SYS_exit
	a.emit(0x31, 0xff)                             // xor edi, edi
	a.emit(0x0f, 0x05)

	// The image: r12 is the heartbeat last seen, r13 the polls since.
	a.label("image")
	a.emit(0x45, 0x31, 0xe4) // xor r12d, r12d
	a.emit(0x45, 0x31, 0xed) // xor r13d, r13d
	a.label("tick")
	a.rip(site+hdrBeatTs, a.imm32(0), 0x48, 0xc7, 0x05)             // mov qword [rip+tv_sec], 0
	a.rip(site+hdrBeatTs+8, a.imm32(100_000_000), 0x48, 0xc7, 0x05) // mov qword [rip+tv_nsec], 100 ms
	a.emit(0xb8, 0x0f, 0x01, 0, 0)                                  // mov eax, SYS_ppoll
	a.emit(0x31, 0xff)                                              // xor edi, edi
	a.emit(0x31, 0xf6)                                              // xor esi, esi
	a.rip(site+hdrBeatTs, nil, 0x48, 0x8d, 0x15)                    // lea rdx, [rip+ts]
	a.emit(0x45, 0x31, 0xd2)                                        // xor r10d, r10d
	a.emit(0x41, 0xb8, 8, 0, 0, 0)                                  // mov r8d, 8
	a.emit(0x0f, 0x05)
	a.rip(site+hdrBeat, nil, 0x48, 0x8b, 0x05) // mov rax, [rip+beat]
	a.emit(0x4c, 0x39, 0xe0)                   // cmp rax, r12
	a.jump("idle", 0x0f, 0x84)                 // je idle
	a.emit(0x49, 0x89, 0xc4)                   // mov r12, rax
	a.emit(0x45, 0x31, 0xed)                   // xor r13d, r13d
	a.jump("tick", 0xe9)                       // jmp tick
	a.label("idle")
	a.emit(0x49, 0xff, 0xc5)             // inc r13
	a.emit(0x49, 0x83, 0xfd, ImageTicks) // cmp r13, ImageTicks
	a.jump("tick", 0x0f, 0x82)           // jb tick
	a.emit(0xb8, 231, 0, 0, 0)           // mov eax, SYS_exit_group
	a.emit(0x31, 0xff)                   // xor edi, edi
	a.emit(0x0f, 0x05)
	a.emit(0xf4) // hlt: never reached
	return a.done()
}

// leaveOut assembles the marking of the mappings to leave out (see the
// comment at the top): rbx counts them down, r14 points at the entry, r15
// holds the descriptor of /proc/self/maps.
func leaveOut(a *asm, site uint64) {
	query := func() {
		a.emit(0xb8, 16, 0, 0, 0) // mov eax, SYS_ioctl
		a.emit(0x4c, 0x89, 0xff)  // mov rdi, r15
		a.emit(0xbe)              // mov esi, PROCMAP_QUERY
		a.emit(a.imm32(maps.QueryIoctl)...)
		a.rip(site+leaveQuery, nil, 0x48, 0x8d, 0x15) // lea rdx, [rip+query]
		a.emit(0x0f, 0x05)                            // syscall
		a.emit(0x48, 0x85, 0xc0)                      // test rax, rax
	}
	// whole jumps to differ unless the mapping the query found is exactly
	// the entry's [start, end).
	whole := func(differ string) {
		a.rip(site+leaveQuery+maps.QueryStartOff, nil, 0x48, 0x8b, 0x05) // mov rax, [rip+vma_start]
		a.emit(0x49, 0x3b, 0x06)                                         // cmp rax, [r14]
		a.jump(differ, 0x0f, 0x85)                                       // jne differ
		a.rip(site+leaveQuery+maps.QueryEndOff, nil, 0x48, 0x8b, 0x05)   // mov rax, [rip+vma_end]
		a.emit(0x49, 0x3b, 0x46, 0x08)                                   // cmp rax, [r14+8]
		a.jump(differ, 0x0f, 0x85)                                       // jne differ
	}
	a.rip(site+leaveCount, nil, 0x48, 0x8b, 0x1d)    // mov rbx, [rip+count]
	a.emit(0x48, 0x85, 0xdb)                         // test rbx, rbx
	a.jump("leave.none", 0x0f, 0x84)                 // jz none
	a.emit(0xb8, 0x01, 0x01, 0, 0)                   // mov eax, SYS_openat
	a.emit(0x48, 0xc7, 0xc7, 0x9c, 0xff, 0xff, 0xff) // mov rdi, AT_FDCWD
	a.rip(site+hdrMapsPath, nil, 0x48, 0x8d, 0x35)   // lea rsi, [rip+path]
	a.emit(0xba, 0, 0, 8, 0)                         // mov edx, O_RDONLY|O_CLOEXEC
	a.emit(0x45, 0x31, 0xd2)                         // xor r10d, r10d
	a.emit(0x0f, 0x05)                               // syscall
	a.emit(0x48, 0x85, 0xc0)                         // test rax, rax
	a.jump("leave.none", 0x0f, 0x88)                 // js none: nothing marked
	a.emit(0x49, 0x89, 0xc7)                         // mov r15, rax
	a.rip(site+leaveEntries, nil, 0x4c, 0x8d, 0x35)  // lea r14, [rip+entries]
	a.label("leave.loop")
	// The mapping must still be exactly [start, end).
	a.emit(0x49, 0x8b, 0x06)                                        // mov rax, [r14]
	a.rip(site+leaveQuery+maps.QueryAddrOff, nil, 0x48, 0x89, 0x05) // mov [rip+query_addr], rax
	query()
	a.jump("leave.next", 0x0f, 0x85) // jnz next
	whole("leave.next")
	a.emit(0xb8, 28, 0, 0, 0)           // mov eax, SYS_madvise
	a.emit(0x49, 0x8b, 0x7e, 0x10)      // mov rdi, [r14+16]
	a.emit(0x49, 0x8b, 0x76, 0x18)      // mov rsi, [r14+24]
	a.emit(0xba, madvDontfork, 0, 0, 0) // mov edx, MADV_DONTFORK
	a.emit(0x0f, 0x05)                  // syscall
	a.emit(0x48, 0x85, 0xc0)            // test rax, rax
	a.jump("leave.next", 0x0f, 0x85)    // jnz next: not marked
	// Split in three (or asked in vain): the mark is ours. Still whole:
	// the program had marked it already.
	a.emit(0x49, 0x8b, 0x46, 0x10)                                  // mov rax, [r14+16]
	a.rip(site+leaveQuery+maps.QueryAddrOff, nil, 0x48, 0x89, 0x05) // mov [rip+query_addr], rax
	query()
	a.jump("leave.ours", 0x0f, 0x85) // jnz ours
	whole("leave.ours")
	a.jump("leave.next", 0xe9) // jmp next
	a.label("leave.ours")
	a.emit(0x49, 0xc7, 0x46, 0x20, 1, 0, 0, 0) // mov qword [r14+32], 1
	a.label("leave.next")
	a.emit(0x49, 0x83, 0xc6, leaveEntry) // add r14, leaveEntry
	a.emit(0x48, 0xff, 0xcb)             // dec rbx
	a.jump("leave.loop", 0x0f, 0x85)     // jnz loop
	a.emit(0xb8, 3, 0, 0, 0)             // mov eax, SYS_close
	a.emit(0x4c, 0x89, 0xff)             // mov rdi, r15
	a.emit(0x0f, 0x05)                   // syscall
	a.label("leave.none")
}

// putBack assembles the undoing of leaveOut's marks, where the routine
// ends whatever the clones did; it keeps r12 (the result).
func putBack(a *asm, site uint64) {
	a.rip(site+leaveCount, nil, 0x48, 0x8b, 0x1d)   // mov rbx, [rip+count]
	a.emit(0x48, 0x85, 0xdb)                        // test rbx, rbx
	a.jump("back.done", 0x0f, 0x84)                 // jz done
	a.rip(site+leaveEntries, nil, 0x4c, 0x8d, 0x35) // lea r14, [rip+entries]
	a.label("back.loop")
	a.emit(0x49, 0x83, 0x7e, 0x20, 0) // cmp qword [r14+32], 0
	a.jump("back.next", 0x0f, 0x84)   // je next
	a.emit(0xb8, 28, 0, 0, 0)         // mov eax, SYS_madvise
	a.emit(0x49, 0x8b, 0x7e, 0x10)    // mov rdi, [r14+16]
	a.emit(0x49, 0x8b, 0x76, 0x18)    // mov rsi, [r14+24]
	a.emit(0xba, madvDofork, 0, 0, 0) // mov edx, MADV_DOFORK
	a.emit(0x0f, 0x05)                // syscall
	a.label("back.next")
	a.emit(0x49, 0x83, 0xc6, leaveEntry) // add r14, leaveEntry
	a.emit(0x48, 0xff, 0xcb)             // dec rbx
	a.jump("back.loop", 0x0f, 0x85)      // jnz loop
	a.label("back.done")
}

// ErrNoImage: the image routine ran but made no image.
var ErrNoImage = errors.New("no copy-on-write image was made")

// ErrSubreaper: the process is a child subreaper, so an image would become
// its child; the routine made none and changed nothing.
var ErrSubreaper = errors.New("the process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): an image would become its child, for it to reap")

// Middle is the part of a mapping sp that the image routine leaves out: from
// the first 2 MiB boundary at least a page in from its start to the last
// one at least a page in from its end. ok is false when there is none.
func Middle(sp maps.Range) (lo, hi uint64, ok bool) {
	if sp.End < sp.Start+2*pageSize {
		return 0, 0, false
	}
	lo = (sp.Start + pageSize + leaveAlign - 1) &^ (leaveAlign - 1)
	hi = (sp.End - pageSize) &^ (leaveAlign - 1)
	return lo, hi, hi > lo
}

// CloneImage makes a copy-on-write image of the process from this thread,
// which must be stopped with every other thread of the process (the image
// is a fork of the whole address space: a thread running meanwhile could
// tear it). It returns the image's pid as the target's pid namespace
// numbers it, and which of the mappings leave names (each exactly one
// mapping, at most MaxLeaveOut) the image left out. The thread is left
// parked in its call site, as after Call.
func (th *Thread) CloneImage(lim CallLimits, leave []maps.Range) (int, []maps.Range, error) {
	if len(leave) > MaxLeaveOut {
		leave = leave[:MaxLeaveOut]
	}
	var written []maps.Range
	ret, err := th.invoke(lim, func(in *injector) uint64 {
		written, _ = writeLeaveOut(th.p, in.base, leave)
		return in.image
	}, nil)
	if err != nil {
		return 0, nil, err
	}
	var left []maps.Range
	if len(written) > 0 {
		base, _, _ := th.Site()
		b := make([]byte, len(written)*leaveEntry)
		if _, err := th.p.ReadAt(b, base+leaveEntries); err == nil {
			for i, sp := range written {
				if binary.LittleEndian.Uint64(b[i*leaveEntry+32:]) != 0 {
					left = append(left, sp)
				}
			}
		}
	}
	switch v := int64(ret); {
	case v < 0:
		return 0, nil, &CloneError{Tid: th.Tid, Err: errnoOf(v)}
	case v == 0:
		base, _, _ := th.Site()
		if reaper, err := th.p.ReadUint64(base + hdrReaper); err == nil && uint32(reaper) != 0 {
			return 0, nil, fmt.Errorf("thread %d: %w", th.Tid, ErrSubreaper)
		}
		return 0, nil, fmt.Errorf("thread %d: %w", th.Tid, ErrNoImage)
	default:
		return int(v), left, nil
	}
}

// writeLeaveOut fills the site's table of mappings to leave out, the
// count last, so that a table the write did not finish is one of none, and
// returns the mappings written. Each mapping's middle starts and ends on a
// 2 MiB boundary at least a page in from its ends; a mapping too small for
// one is left in.
func writeLeaveOut(p *Process, base uint64, leave []maps.Range) ([]maps.Range, error) {
	le := binary.LittleEndian
	var word [8]byte
	if _, err := p.WriteAt(word[:], base+leaveCount); err != nil {
		return nil, err
	}
	table := make([]byte, leaveEntries-leaveQuery, 0x1000-leaveQuery)
	le.PutUint64(table, maps.QuerySize)
	var written []maps.Range
	for _, sp := range leave {
		lo, hi, ok := Middle(sp)
		if !ok {
			continue
		}
		var e [leaveEntry]byte
		le.PutUint64(e[:], sp.Start)
		le.PutUint64(e[8:], sp.End)
		le.PutUint64(e[16:], lo)
		le.PutUint64(e[24:], hi-lo)
		table = append(table, e[:]...)
		written = append(written, sp)
	}
	if len(written) == 0 {
		return nil, nil
	}
	if _, err := p.WriteAt([]byte(mapsPath), base+hdrMapsPath); err != nil {
		return nil, err
	}
	if _, err := p.WriteAt(table, base+leaveQuery); err != nil {
		return nil, err
	}
	le.PutUint64(word[:], uint64(len(written)))
	if _, err := p.WriteAt(word[:], base+leaveCount); err != nil {
		return nil, err
	}
	return written, nil
}

// CloneError: the kernel refused one of the image routine's clones (no
// memory under strict overcommit, a process limit, a security module); the
// routine undid what it did, and no image exists.
type CloneError struct {
	Tid int
	Err error
}

func (e *CloneError) Error() string { return fmt.Sprintf("thread %d: clone: %v", e.Tid, e.Err) }

func (e *CloneError) Unwrap() error { return e.Err }

// rawRoutine assembles a function that issues the syscall its first
// argument names with the next five as its arguments and 0 as the sixth
// (mmap's offset: a call passes six integer arguments in registers, the
// syscall number takes one), and returns its rax.
func rawRoutine() []byte {
	return []byte{
		0x48, 0x89, 0xf8, // mov rax, rdi
		0x48, 0x89, 0xf7, // mov rdi, rsi
		0x48, 0x89, 0xd6, // mov rsi, rdx
		0x48, 0x89, 0xca, // mov rdx, rcx
		0x4d, 0x89, 0xc2, // mov r10, r8
		0x4d, 0x89, 0xc8, // mov r8, r9
		0x45, 0x31, 0xc9, // xor r9d, r9d
		0x0f, 0x05, // syscall
		0xc3, // ret
	}
}

// RawSyscall issues syscall nr with up to five arguments (the sixth is 0)
// from the thread,
// through its call site (made by the first call), and returns the raw
// result (-errno on failure). Only for syscalls that need no lock a
// stopped thread could hold.
func (th *Thread) RawSyscall(lim CallLimits, nr uint64, args ...uint64) (uint64, error) {
	if len(args) > 5 {
		return 0, errors.New("ptrace: at most 5 syscall arguments")
	}
	return th.invoke(lim, func(in *injector) uint64 { return in.raw }, append([]uint64{nr}, args...))
}
