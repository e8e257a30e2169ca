package inject

import (
	"encoding/binary"
	"fmt"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/maps"
)

// ThreadState is what the hijack policy needs to know of a stopped thread:
// its registers (pc and sp are what it reads) and the syscall it is blocked
// in, which ptrace tells from the registers and /proc/PID/task/TID/syscall
// from the kernel's own record.
type ThreadState struct {
	Tid     int
	Regs    debuggee.Regs
	Syscall int64 // syscall the thread is blocked in, or -1 when it runs code
	Args    [6]uint64
}

// The blocking syscalls that glibc's allocator
// never makes while it holds a lock (per malloc/malloc.c and
// malloc/arena.c). The allocator's own syscalls (mmap, munmap, mprotect,
// madvise, brk, prctl, getrandom, openat) and write (malloc_stats prints
// under an arena lock) are deliberately absent: a thread blocked in one of
// them may be inside malloc holding a lock. read is present although malloc
// reads files: /sys/devices/system/cpu/online through __get_nprocs in
// arena_get2 (malloc/arena.c, before 2.35 and from 2.39) and the huge page
// sizes at start-up (malloc/hugepages.c, from 2.35). It reads them with no
// arena lock held, and a thread blocked there has a return address into
// malloc on its stack, which scanStack refuses.
// They are named, and numbered by the host's machine (arch.Host: live
// processes are of arenactl's own machine): aarch64 has no poll, select,
// pause or epoll_wait.
var safeSyscalls = func() map[int64]string {
	m := map[int64]string{}
	for _, name := range []string{"read", "poll", "pread64", "readv", "select", "pause",
		"nanosleep", "accept", "recvfrom", "recvmsg", "wait4", "semget", "semop", "msgsnd",
		"msgrcv", "rt_sigsuspend", "rt_sigtimedwait", "futex", "io_getevents",
		"restart_syscall", "semtimedop", "clock_nanosleep", "epoll_wait", "waitid",
		"pselect6", "ppoll", "epoll_pwait", "accept4", "recvmmsg", "epoll_pwait2",
		"io_uring_enter"} {
		if nr, ok := arch.Host().Sys(name); ok {
			m[int64(nr)] = name
		}
	}
	return m
}()

var sysFutex = int64(arch.Host().MustSys("futex"))

// allocatorEntryPoints are the exported functions that take or hold an arena
// lock. A return address into any of them on a thread's stack means the
// thread is inside the allocator, whatever syscall it sits in.
var allocatorEntryPoints = []string{
	"malloc", "free", "calloc", "realloc", "reallocarray", "memalign",
	"aligned_alloc", "posix_memalign", "valloc", "pvalloc", "cfree",
	"malloc_trim", "malloc_info", "malloc_stats", "mallinfo", "mallinfo2",
	"mallopt", "malloc_usable_size", "__libc_malloc", "__libc_free",
	"__libc_calloc", "__libc_realloc", "__libc_memalign", "fork", "_Fork",
}

// maxStackScan bounds how much of a thread's stack the policy reads.
const maxStackScan = 256 << 10

type span struct {
	lo, hi uint64
	name   string
}

// HijackPolicy decides whether a stopped thread may run allocator code. It
// errs on the side of refusing: a refused thread is let go untouched and
// another one (or a later moment) is tried.
type HijackPolicy struct {
	allocFns   []span
	ownText    []span // libc and ld.so code: a thread running there may hold any lock
	lockData   []span // libc/ld.so writable data: main_arena, list_lock, stdio locks live here
	arenaHeaps []maps.Mapping
	sigreturn  uint64
	stackOf    []maps.Mapping
}

// NewHijackPolicy prepares the policy for one process, whose signal
// trampoline (libc's __restore_rt, 0 if unknown) is at sigreturn.
func NewHijackPolicy(l *libc.Libc, ms []maps.Mapping, sigreturn uint64) *HijackPolicy {
	p := &HijackPolicy{stackOf: ms, sigreturn: sigreturn}
	for _, name := range allocatorEntryPoints {
		if s, ok := l.Lookup(name); ok && s.Size > 0 {
			p.allocFns = append(p.allocFns, span{s.Value, s.Value + s.Size, name})
		}
	}
	for _, m := range ms {
		base, own := libc.OwnObject(m)
		switch {
		case own && m.Executable():
			p.ownText = append(p.ownText, span{m.Start, m.End, base})
		case own && m.Writable():
			p.lockData = append(p.lockData, span{m.Start, m.End, base})
		case m.Class == maps.ClassArenaHeap && m.Writable():
			p.arenaHeaps = append(p.arenaHeaps, m)
		}
	}
	return p
}

// Sigreturn is the address of libc's signal trampoline (__restore_rt), 0 if
// it was not found.
func (p *HijackPolicy) Sigreturn() uint64 { return p.sigreturn }

// Check returns nil when the thread may be borrowed, or an error that says
// why not.
func (p *HijackPolicy) Check(ts ThreadState, mem glibc.Memory) error {
	if ts.Syscall >= 0 {
		if _, ok := safeSyscalls[ts.Syscall]; !ok {
			return fmt.Errorf("blocked in syscall %d, which the allocator itself may issue", ts.Syscall)
		}
		if ts.Syscall == sysFutex {
			if why := p.allocatorLock(ts.Args[0]); why != "" {
				return fmt.Errorf("waiting on %s", why)
			}
		}
	} else if s, ok := find(p.ownText, ts.Regs.PCOf(arch.Host())); ok {
		return fmt.Errorf("running code inside %s (pc %#x)", s.name, ts.Regs.PCOf(arch.Host()))
	}
	return p.scanStack(ts, mem)
}

// allocatorLock names the lock a futex address belongs to, if it is one the
// allocator or stdio may hold: anything in libc's or ld.so's writable data
// (main_arena, list_lock, free_list_lock, stdout's lock), or the mutex at the
// head of a non-main arena (just after heap_info: +0x20, or +0x30 from 2.35).
func (p *HijackPolicy) allocatorLock(addr uint64) string {
	if s, ok := find(p.lockData, addr); ok {
		return fmt.Sprintf("a lock in %s's data (%#x)", s.name, addr)
	}
	for _, h := range p.arenaHeaps {
		if addr >= h.Start && addr < h.Start+0x40 {
			return fmt.Sprintf("an arena lock (%#x)", addr)
		}
	}
	return ""
}

// scanStack looks at the words above the stack pointer (the live frames) for
// a return address into an allocator entry point or the signal trampoline.
// Stale words in uninitialised locals can make this refuse a thread that
// was safe; it never makes it accept one that was not, as long as frames
// keep return addresses on the stack.
func (p *HijackPolicy) scanStack(ts ThreadState, mem glibc.Memory) error {
	if a := arch.Host(); a == arch.ARM64 {
		// A leaf function keeps its return address in the link register
		// (x30, word 30 of user_pt_regs), never on the stack.
		if lr := a.StripCode(ts.Regs[arch.ARM64LR]); lr != 0 {
			if s, ok := find(p.allocFns, lr); ok && lr != s.lo {
				return fmt.Errorf("inside the allocator (return address into %s in the link register)", s.name)
			}
		}
	}
	sp := ts.Regs.SPOf(arch.Host())
	m, ok := maps.Find(p.stackOf, sp)
	if !ok {
		return fmt.Errorf("stack pointer %#x is in no mapping", sp)
	}
	n := m.End - sp
	if n > maxStackScan {
		n = maxStackScan
	}
	buf := make([]byte, n&^7)
	got, err := mem.ReadAt(buf, sp)
	if err != nil && got == 0 {
		return fmt.Errorf("reading its stack at %#x: %v", sp, err)
	}
	for off := 0; off+8 <= got; off += 8 {
		w := binary.LittleEndian.Uint64(buf[off:])
		if w == 0 {
			continue
		}
		if p.sigreturn != 0 && w == p.sigreturn {
			return fmt.Errorf("running a signal handler (sigreturn frame at sp+%#x)", off)
		}
		if s, ok := find(p.allocFns, w); ok && w != s.lo {
			return fmt.Errorf("inside the allocator (return address into %s at sp+%#x)", s.name, off)
		}
	}
	return nil
}

func find(ss []span, addr uint64) (span, bool) {
	for _, s := range ss {
		if addr >= s.lo && addr < s.hi {
			return s, true
		}
	}
	return span{}, false
}

// SyscallName names a syscall of the safe list, for messages.
func SyscallName(nr int64) string {
	if n, ok := safeSyscalls[nr]; ok {
		return n
	}
	return fmt.Sprintf("syscall %d", nr)
}

// SafeSyscall reports whether nr is on the list of blocking syscalls the
// allocator never issues while holding a lock.
func SafeSyscall(nr int64) bool {
	_, ok := safeSyscalls[nr]
	return ok
}
