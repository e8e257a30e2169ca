/* The call site's code page on x86_64: the routine every injected call
 * returns into (entry, the gate, restore), the copy-on-write image routine
 * (image), the raw syscall routine (raw) and the lock routine (lock).
 * internal/ptrace places it at CODE_OFF in the site and says what each
 * part does and why; this file is only their instructions. Every jump is
 * rel32 ({disp32}), as the encoder the routines were first written with
 * emitted them. Built by blob/gen.sh into amd64.bin. */
#include <asm/unistd.h>
#include "site.h"

#define H(off) (.Lbase + (off) - CODE_OFF)(%rip)
#define SYSCALL(nr) mov $nr, %eax

	.text
	.globl site_code, restore, image, raw, lock, lock_wait, lock_end
site_code:
.Lbase:
	/* entry: a call returned here with its result in rax */
	mov %rax, H(HDR_RESULT)
	mov H(HDR_PENDING), %rax
	mov %rax, H(HDR_DONE)
	/* the gate: ppoll(NULL, 0, &timeout, NULL, 8), the timeout set
	 * afresh, since an interrupted ppoll writes back the time left */
	movq $GATE_SEC, H(HDR_TIMEOUT)
	movq $GATE_NSEC, H(HDR_TIMEOUT+8)
	SYSCALL(__NR_ppoll)
	xor %edi, %edi
	xor %esi, %esi
	lea H(HDR_TIMEOUT), %rdx
	xor %r10d, %r10d
	mov $8, %r8d
	syscall
restore:
	mov H(HDR_RFBM), %eax
	mov H(HDR_RFBM+4), %edx
	xrstor64 H(XSAVE_OFF)
	/* the slots internal/ptrace's siteRegs fills, in its order */
	mov H(REGS_OFF+8*0), %r8
	mov H(REGS_OFF+8*1), %r9
	mov H(REGS_OFF+8*2), %r10
	mov H(REGS_OFF+8*3), %r11
	mov H(REGS_OFF+8*4), %r12
	mov H(REGS_OFF+8*5), %r13
	mov H(REGS_OFF+8*6), %r14
	mov H(REGS_OFF+8*7), %r15
	mov H(REGS_OFF+8*8), %rdi
	mov H(REGS_OFF+8*9), %rsi
	mov H(REGS_OFF+8*10), %rbp
	mov H(REGS_OFF+8*11), %rbx
	mov H(REGS_OFF+8*12), %rdx
	mov H(REGS_OFF+8*13), %rcx
	mov H(REGS_OFF+8*14), %rax
	/* rflags, then rsp and rip with instructions that change no flag;
	 * the push writes below the current rsp, below the red zone of the
	 * thread's own */
	pushq H(REGS_OFF+8*15)
	popfq
	movq $1, H(HDR_RESTORED)
	mov H(REGS_OFF+8*16), %rsp
	jmp *H(REGS_OFF+8*17)

	.balign 16, 0
image:
	/* not in a child subreaper: return 0, the flag says why */
	mov $__NR_prctl, %eax
	mov $PR_GET_CHILD_SUBREAPER_, %edi
	lea H(HDR_REAPER), %rsi
	syscall
	test %rax, %rax
	{disp32} js image.start
	mov H(HDR_REAPER), %eax
	test %eax, %eax
	{disp32} jz image.start
	xor %eax, %eax
	ret
image.start:
	SYSCALL(__NR_rt_sigprocmask)
	mov $SIG_SETMASK_, %edi
	lea H(HDR_SIG_ALL), %rsi
	lea H(HDR_SIG_OLD), %rdx
	mov $8, %r10d
	syscall

	/* leave out: rbx counts the mappings down, r14 points at the entry,
	 * r15 holds the descriptor of /proc/self/maps */
	mov H(LEAVE_COUNT), %rbx
	test %rbx, %rbx
	{disp32} jz leave.none
	SYSCALL(__NR_openat)
	mov $AT_FDCWD_, %rdi
	lea H(HDR_MAPS_PATH), %rsi
	mov $O_RDONLY_CLOEXEC_, %edx
	xor %r10d, %r10d
	syscall
	test %rax, %rax
	{disp32} js leave.none
	mov %rax, %r15
	lea H(LEAVE_ENTRIES), %r14
leave.loop:
	/* the mapping must still be exactly [start, end) */
	mov (%r14), %rax
	mov %rax, H(LEAVE_QUERY+QUERY_ADDR_OFF)
	SYSCALL(__NR_ioctl)
	mov %r15, %rdi
	mov $PROCMAP_QUERY_, %esi
	lea H(LEAVE_QUERY), %rdx
	syscall
	test %rax, %rax
	{disp32} jnz leave.next
	mov H(LEAVE_QUERY+QUERY_START_OFF), %rax
	cmp (%r14), %rax
	{disp32} jne leave.next
	mov H(LEAVE_QUERY+QUERY_END_OFF), %rax
	cmp 8(%r14), %rax
	{disp32} jne leave.next
	SYSCALL(__NR_madvise)
	mov 16(%r14), %rdi
	mov 24(%r14), %rsi
	mov $MADV_DONTFORK_, %edx
	syscall
	test %rax, %rax
	{disp32} jnz leave.next
	/* split in three (or asked in vain): the mark is ours; still whole:
	 * the program had marked it already */
	mov 16(%r14), %rax
	mov %rax, H(LEAVE_QUERY+QUERY_ADDR_OFF)
	SYSCALL(__NR_ioctl)
	mov %r15, %rdi
	mov $PROCMAP_QUERY_, %esi
	lea H(LEAVE_QUERY), %rdx
	syscall
	test %rax, %rax
	{disp32} jnz leave.ours
	mov H(LEAVE_QUERY+QUERY_START_OFF), %rax
	cmp (%r14), %rax
	{disp32} jne leave.ours
	mov H(LEAVE_QUERY+QUERY_END_OFF), %rax
	cmp 8(%r14), %rax
	{disp32} jne leave.ours
	{disp32} jmp leave.next
leave.ours:
	movq $1, 32(%r14)
leave.next:
	add $LEAVE_ENTRY, %r14
	dec %rbx
	{disp32} jnz leave.loop
	SYSCALL(__NR_close)
	mov %r15, %rdi
	syscall
leave.none:

	/* clone(CLONE_VM|CLONE_VFORK|CLONE_UNTRACED, 0, 0, 0, 0): a helper
	 * sharing the memory, exit signal 0 */
	SYSCALL(__NR_clone)
	mov $(CLONE_VM_|CLONE_VFORK_|CLONE_UNTRACED_), %edi
	xor %esi, %esi
	xor %edx, %edx
	xor %r10d, %r10d
	xor %r8d, %r8d
	syscall
	test %rax, %rax
	{disp32} jz image.helper
	{disp32} js image.unmask
	mov %rax, %r12
image.wait:
	SYSCALL(__NR_wait4)
	mov %r12, %rdi
	xor %esi, %esi
	mov $WALL_, %edx
	xor %r10d, %r10d
	syscall
	cmp $-EINTR_, %rax
	{disp32} je image.wait
	mov H(HDR_IMAGE_PID), %rax
image.unmask:
	mov %rax, %r12

	/* put back what leave out marked; r12 keeps the result */
	mov H(LEAVE_COUNT), %rbx
	test %rbx, %rbx
	{disp32} jz back.done
	lea H(LEAVE_ENTRIES), %r14
back.loop:
	cmpq $0, 32(%r14)
	{disp32} je back.next
	SYSCALL(__NR_madvise)
	mov 16(%r14), %rdi
	mov 24(%r14), %rsi
	mov $MADV_DOFORK_, %edx
	syscall
back.next:
	add $LEAVE_ENTRY, %r14
	dec %rbx
	{disp32} jnz back.loop
back.done:
	SYSCALL(__NR_rt_sigprocmask)
	mov $SIG_SETMASK_, %edi
	lea H(HDR_SIG_OLD), %rsi
	xor %edx, %edx
	mov $8, %r10d
	syscall
	mov %r12, %rax
	ret

image.helper:
	/* clone(SIGCHLD|CLONE_UNTRACED): the image */
	SYSCALL(__NR_clone)
	mov $(SIGCHLD_|CLONE_UNTRACED_), %edi
	xor %esi, %esi
	xor %edx, %edx
	xor %r10d, %r10d
	xor %r8d, %r8d
	syscall
	test %rax, %rax
	{disp32} jz image.image
	mov %rax, H(HDR_IMAGE_PID)
	SYSCALL(__NR_exit)
	xor %edi, %edi
	syscall

image.image:
	/* r12 is the heartbeat last seen, r13 the polls since */
	xor %r12d, %r12d
	xor %r13d, %r13d
image.tick:
	movq $0, H(HDR_BEAT_TS)
	movq $IMAGE_TICK_NSEC, H(HDR_BEAT_TS+8)
	SYSCALL(__NR_ppoll)
	xor %edi, %edi
	xor %esi, %esi
	lea H(HDR_BEAT_TS), %rdx
	xor %r10d, %r10d
	mov $8, %r8d
	syscall
	mov H(HDR_BEAT), %rax
	cmp %r12, %rax
	{disp32} je image.idle
	mov %rax, %r12
	xor %r13d, %r13d
	{disp32} jmp image.tick
image.idle:
	inc %r13
	cmp $IMAGE_TICKS, %r13
	{disp32} jb image.tick
	SYSCALL(__NR_exit_group)
	xor %edi, %edi
	syscall
	hlt

raw:
	/* syscall(rdi) with rsi, rdx, rcx, r8, r9 and 0 as arguments */
	mov %rdi, %rax
	mov %rsi, %rdi
	mov %rdx, %rsi
	mov %rcx, %rdx
	mov %r8, %r10
	mov %r9, %r8
	xor %r9d, %r9d
	syscall
	ret

	.balign 16, 0
lock:
	/* rdi the lock word, rsi the polls it may hold it for */
	mov %rdi, %r12
	mov %rsi, %r13
	xor %eax, %eax
	mov $1, %ecx
	lock cmpxchg %ecx, (%r12)
	{disp32} jz lock.got
lock.slow:
	mov $2, %eax
	xchg %eax, (%r12)
	test %eax, %eax
	{disp32} jz lock.got
	mov %r12, %rdi
	mov $FUTEX_WAIT_PRIVATE_, %esi
	mov $2, %edx
	xor %r10d, %r10d
	mov $__NR_futex, %eax
	syscall
lock_wait:
	{disp32} jmp lock.slow
lock.got:
	mov $__NR_rt_sigprocmask, %eax
	mov $SIG_SETMASK_, %edi
	lea H(HDR_SIG_ALL), %rsi
	lea H(HDR_SIG_OLD), %rdx
	mov $8, %r10d
	syscall
	movq $LOCK_STATE_HOLDING, H(HDR_LOCK_STATE)
lock.wait:
	cmpq $0, H(HDR_LOCK_RELEASE)
	{disp32} jne lock.out
	test %r13, %r13
	{disp32} jz lock.out
	dec %r13
	movq $0, H(HDR_LOCK_TS)
	movq $LOCK_TICK_NSEC, H(HDR_LOCK_TS+8)
	SYSCALL(__NR_ppoll)
	xor %edi, %edi
	xor %esi, %esi
	lea H(HDR_LOCK_TS), %rdx
	xor %r10d, %r10d
	mov $8, %r8d
	syscall
	{disp32} jmp lock.wait
lock.out:
	movq $LOCK_STATE_LETTING_GO, H(HDR_LOCK_STATE)
	xor %eax, %eax
	xchg %eax, (%r12)
	cmp $1, %eax
	{disp32} jle lock.unmask
	mov %r12, %rdi
	mov $FUTEX_WAKE_PRIVATE_, %esi
	mov $1, %edx
	mov $__NR_futex, %eax
	syscall
lock.unmask:
	mov $__NR_rt_sigprocmask, %eax
	mov $SIG_SETMASK_, %edi
	lea H(HDR_SIG_OLD), %rsi
	xor %edx, %edx
	mov $8, %r10d
	syscall
	xor %eax, %eax
	ret
lock_end:
