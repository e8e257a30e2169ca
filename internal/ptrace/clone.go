package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
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
)

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

// ErrNoImage: the image routine ran but made no image.
var ErrNoImage = errors.New("no copy-on-write image was made")

// ErrSubreaper: the process is a child subreaper, so an image would become
// its child; the routine made none and changed nothing.
var ErrSubreaper = errors.New("the process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): an image would become its child, for it to reap")

// CloneImage makes a copy-on-write image of the process from this thread,
// which must be stopped with every other thread of the process (the image
// is a fork of the whole address space: a thread running meanwhile could
// tear it). It returns the image's pid as the target's pid namespace
// numbers it. The thread is left parked in its call site, as after Call.
func (th *Thread) CloneImage(lim CallLimits) (int, error) {
	ret, err := th.invoke(lim, func(in *injector) uint64 { return in.image }, nil)
	if err != nil {
		return 0, err
	}
	switch v := int64(ret); {
	case v < 0:
		return 0, &CloneError{Tid: th.Tid, Err: errnoOf(v)}
	case v == 0:
		base, _, _ := th.Site()
		if reaper, err := th.p.ReadUint64(base + hdrReaper); err == nil && uint32(reaper) != 0 {
			return 0, fmt.Errorf("thread %d: %w", th.Tid, ErrSubreaper)
		}
		return 0, fmt.Errorf("thread %d: %w", th.Tid, ErrNoImage)
	default:
		return int(v), nil
	}
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
// argument names with the next five as its arguments, and returns its rax.
func rawRoutine() []byte {
	return []byte{
		0x48, 0x89, 0xf8, // mov rax, rdi
		0x48, 0x89, 0xf7, // mov rdi, rsi
		0x48, 0x89, 0xd6, // mov rsi, rdx
		0x48, 0x89, 0xca, // mov rdx, rcx
		0x4d, 0x89, 0xc2, // mov r10, r8
		0x4d, 0x89, 0xc8, // mov r8, r9
		0x0f, 0x05, // syscall
		0xc3, // ret
	}
}

// RawSyscall issues syscall nr with up to five arguments from the thread,
// through its call site (made by the first call), and returns the raw
// result (-errno on failure). Only for syscalls that need no lock a
// stopped thread could hold.
func (th *Thread) RawSyscall(lim CallLimits, nr uint64, args ...uint64) (uint64, error) {
	if len(args) > 5 {
		return 0, errors.New("ptrace: at most 5 syscall arguments")
	}
	return th.invoke(lim, func(in *injector) uint64 { return in.raw }, append([]uint64{nr}, args...))
}
