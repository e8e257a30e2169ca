/* The call site's code page on aarch64: the routine every injected call
 * returns into (entry, the gate, restore), the raw syscall routine (raw)
 * and the lock routine (lock), as site_amd64.S has them for x86_64;
 * internal/ptrace says what each does and why. The copy-on-write image
 * routine is not written for aarch64 yet (Image is 0).
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
	.globl site_code, restore, raw, lock, lock_wait, lock_end
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
