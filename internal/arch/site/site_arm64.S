/* The call site's code page on aarch64: the routine every injected call
 * returns into (entry, the gate, restore), the raw syscall routine (raw)
 * the copy-on-write image routine (image) and the lock routine (lock), as
 * site_amd64.S has them for x86_64; internal/ptrace says what each does
 * and why.
 *
 * Restore differs: aarch64 has no instruction that jumps to an address in
 * memory, so putting back every register and the pc by loads would need
 * one register to spare. The routine returns through rt_sigreturn
 * instead, with its stack pointer at a signal frame arenactl wrote at
 * FRAME_OFF (struct rt_sigframe, arch/arm64/kernel/signal.c): the kernel
 * puts back x0..x30, sp, pc, pstate, the FP/SIMD registers and the signal
 * mask from it, all at once. Built by gen.sh into arm64.bin. */
#include <asm/unistd.h>
#include "site.h"
#undef CODE_OFF
#define CODE_OFF ARM64_CODE_OFF

#define H(off) (.Lbase + (off) - CODE_OFF)

/* A 32-bit constant into a register. */
.macro movl reg, imm
	movz \reg, #((\imm) & 0xffff)
	movk \reg, #(((\imm) >> 16) & 0xffff), lsl #16
.endm

/* rt_sigprocmask(SIG_SETMASK, set, old or NULL, 8) */
.macro setmask set, old
	mov x8, #__NR_rt_sigprocmask
	mov x0, #SIG_SETMASK_
	adr x1, H(\set)
	.if \old
	adr x2, H(\old)
	.else
	mov x2, #0
	.endif
	mov x3, #8
	svc #0
.endm

	.text
	.globl site_code, restore, image, raw, lock, lock_wait, lock_end
site_code:
.Lbase:
	/* entry: a call returned here with its result in x0. The done word
	 * is stored with release: arenactl reads it from another CPU, then
	 * the result. */
	adr x9, H(HDR_RESULT)
	str x0, [x9]
	adr x9, H(HDR_PENDING)
	ldr x10, [x9]
	adr x9, H(HDR_DONE)
	stlr x10, [x9]
	/* the gate: ppoll(NULL, 0, &timeout, NULL, 8), the timeout set
	 * afresh, since an interrupted ppoll writes back the time left */
	adr x2, H(HDR_TIMEOUT)
	mov x9, #GATE_SEC
	str x9, [x2]
	mov x9, #GATE_NSEC
	str x9, [x2, #8]
	mov x8, #__NR_ppoll
	mov x0, #0
	mov x1, #0
	mov x3, #0
	mov x4, #8
	svc #0
restore:
	adr x9, H(HDR_RESTORED)
	mov x10, #1
	str x10, [x9]
	adr x9, H(FRAME_OFF)
	mov sp, x9
	mov x8, #__NR_rt_sigreturn
	svc #0
	brk #0 /* never reached: rt_sigreturn does not return here */

	.balign 16, 0
image:
	/* not in a child subreaper: return 0, the flag says why. The
	 * routine keeps its own in x19..x23 (the thread's own are restored
	 * with the rest); no syscall changes them. */
	mov x8, #__NR_prctl
	mov x0, #PR_GET_CHILD_SUBREAPER_
	adr x1, H(HDR_REAPER)
	svc #0
	tbnz x0, #63, image.start
	adr x9, H(HDR_REAPER)
	ldr w9, [x9]
	cbz w9, image.start
	mov x0, #0
	ret
image.start:
	mov x23, x30 /* the call's return, kept across the bl below */
	setmask HDR_SIG_ALL, HDR_SIG_OLD

	/* leave out: x19 counts the mappings down, x20 points at the entry,
	 * x21 holds the descriptor of /proc/self/maps */
	adr x9, H(LEAVE_COUNT)
	ldr x19, [x9]
	cbz x19, leave.none
	mov x8, #__NR_openat
	mov x0, #AT_FDCWD_
	adr x1, H(HDR_MAPS_PATH)
	movl x2, O_RDONLY_CLOEXEC_
	mov x3, #0
	svc #0
	tbnz x0, #63, leave.none
	mov x21, x0
	adr x20, H(LEAVE_ENTRIES)
leave.loop:
	/* the mapping must still be exactly [start, end) */
	ldr x0, [x20]
	bl leave.query
	cbnz x0, leave.next
	bl leave.same
	b.ne leave.next
	mov x8, #__NR_madvise
	ldr x0, [x20, #16]
	ldr x1, [x20, #24]
	mov x2, #MADV_DONTFORK_
	svc #0
	cbnz x0, leave.next
	/* split in three (or asked in vain): the mark is ours; still whole:
	 * the program had marked it already */
	ldr x0, [x20, #16]
	bl leave.query
	cbnz x0, leave.ours
	bl leave.same
	b.eq leave.next
leave.ours:
	mov x9, #1
	str x9, [x20, #32]
leave.next:
	add x20, x20, #LEAVE_ENTRY
	subs x19, x19, #1
	b.ne leave.loop
	mov x8, #__NR_close
	mov x0, x21
	svc #0
	b leave.none
leave.query:
	/* PROCMAP_QUERY of the mapping at x0 */
	adr x9, H(LEAVE_QUERY+QUERY_ADDR_OFF)
	str x0, [x9]
	mov x8, #__NR_ioctl
	mov x0, x21
	movl x1, PROCMAP_QUERY_
	adr x2, H(LEAVE_QUERY)
	svc #0
	ret
leave.same:
	/* flags eq: the mapping the query found is the entry's [start, end) */
	adr x9, H(LEAVE_QUERY+QUERY_START_OFF)
	ldr x9, [x9]
	ldr x10, [x20]
	cmp x9, x10
	b.ne 1f
	adr x9, H(LEAVE_QUERY+QUERY_END_OFF)
	ldr x9, [x9]
	ldr x10, [x20, #8]
	cmp x9, x10
1:	ret
leave.none:

	/* clone(CLONE_VM|CLONE_VFORK|CLONE_UNTRACED, 0, 0, 0, 0): a helper
	 * sharing the memory, exit signal 0 */
	mov x8, #__NR_clone
	movl x0, (CLONE_VM_|CLONE_VFORK_|CLONE_UNTRACED_)
	mov x1, #0
	mov x2, #0
	mov x3, #0
	mov x4, #0
	svc #0
	cbz x0, image.helper
	tbnz x0, #63, image.unmask
	mov x22, x0
image.wait:
	mov x8, #__NR_wait4
	mov x0, x22
	mov x1, #0
	movl x2, WALL_
	mov x3, #0
	svc #0
	cmn x0, #EINTR_
	b.eq image.wait
	adr x9, H(HDR_IMAGE_PID)
	ldr x0, [x9]
image.unmask:
	mov x22, x0

	/* put back what leave out marked; x22 keeps the result */
	adr x9, H(LEAVE_COUNT)
	ldr x19, [x9]
	cbz x19, back.done
	adr x20, H(LEAVE_ENTRIES)
back.loop:
	ldr x9, [x20, #32]
	cbz x9, back.next
	mov x8, #__NR_madvise
	ldr x0, [x20, #16]
	ldr x1, [x20, #24]
	mov x2, #MADV_DOFORK_
	svc #0
back.next:
	add x20, x20, #LEAVE_ENTRY
	subs x19, x19, #1
	b.ne back.loop
back.done:
	setmask HDR_SIG_OLD, 0
	mov x0, x22
	mov x30, x23
	ret

image.helper:
	/* clone(SIGCHLD|CLONE_UNTRACED): the image. The helper shares the
	 * thread's stack and uses none of it. */
	mov x8, #__NR_clone
	movl x0, (SIGCHLD_|CLONE_UNTRACED_)
	mov x1, #0
	mov x2, #0
	mov x3, #0
	mov x4, #0
	svc #0
	cbz x0, image.image
	adr x9, H(HDR_IMAGE_PID)
	str x0, [x9]
	mov x8, #__NR_exit
	mov x0, #0
	svc #0

image.image:
	/* x19 is the heartbeat last seen, x20 the polls since */
	mov x19, #0
	mov x20, #0
image.tick:
	adr x2, H(HDR_BEAT_TS)
	str xzr, [x2]
	movl x9, IMAGE_TICK_NSEC
	str x9, [x2, #8]
	mov x8, #__NR_ppoll
	mov x0, #0
	mov x1, #0
	mov x3, #0
	mov x4, #8
	svc #0
	adr x9, H(HDR_BEAT)
	ldr x9, [x9]
	cmp x9, x19
	b.eq image.idle
	mov x19, x9
	mov x20, #0
	b image.tick
image.idle:
	add x20, x20, #1
	cmp x20, #IMAGE_TICKS
	b.lo image.tick
	mov x8, #__NR_exit_group
	mov x0, #0
	svc #0
	brk #0

raw:
	/* syscall(x0) with x1..x5 and 0 as arguments */
	mov x8, x0
	mov x0, x1
	mov x1, x2
	mov x2, x3
	mov x3, x4
	mov x4, x5
	mov x5, #0
	svc #0
	ret

	.balign 16, 0
lock:
	/* x0 the lock word, x1 the polls it may hold it for; x19 and x20
	 * keep them (the thread's own are restored with the rest). Taken
	 * with acquire, let go with release, as glibc's lll_lock and
	 * lll_unlock are. */
	mov x19, x0
	mov x20, x1
1:	ldaxr w9, [x19] /* compare-and-swap 0 -> 1 */
	cbnz w9, lock.slow
	mov w10, #1
	stxr w11, w10, [x19]
	cbnz w11, 1b
	b lock.got
lock.slow:
2:	ldaxr w9, [x19] /* exchange 2 in */
	mov w10, #2
	stxr w11, w10, [x19]
	cbnz w11, 2b
	cbz w9, lock.got
	mov x0, x19
	mov x1, #FUTEX_WAIT_PRIVATE_
	mov x2, #2
	mov x3, #0
	mov x8, #__NR_futex
	svc #0
lock_wait:
	b lock.slow
lock.got:
	setmask HDR_SIG_ALL, HDR_SIG_OLD
	adr x10, H(HDR_LOCK_STATE)
	mov x9, #LOCK_STATE_HOLDING
	str x9, [x10]
lock.wait:
	adr x10, H(HDR_LOCK_RELEASE)
	ldr x9, [x10]
	cbnz x9, lock.out
	cbz x20, lock.out
	sub x20, x20, #1
	adr x2, H(HDR_LOCK_TS)
	str xzr, [x2]
	movl x9, LOCK_TICK_NSEC
	str x9, [x2, #8]
	mov x8, #__NR_ppoll
	mov x0, #0
	mov x1, #0
	mov x3, #0
	mov x4, #8
	svc #0
	b lock.wait
lock.out:
	adr x10, H(HDR_LOCK_STATE)
	mov x9, #LOCK_STATE_LETTING_GO
	str x9, [x10]
3:	ldxr w9, [x19] /* exchange 0 in */
	stlxr w11, wzr, [x19]
	cbnz w11, 3b
	cmp w9, #1
	b.le lock.unmask
	mov x0, x19
	mov x1, #FUTEX_WAKE_PRIVATE_
	mov x2, #1
	mov x8, #__NR_futex
	svc #0
lock.unmask:
	setmask HDR_SIG_OLD, 0
	mov x0, #0
	ret
lock_end:
