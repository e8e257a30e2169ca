/* A 32-bit i386 program with no libc: it prints "ready", then answers
 * every line on stdin with "bye" and exits 0. arenactl must refuse it
 * (exit 18) without stopping it: e2e/walk's TestRefuses32BitProgram.
 * Built with `as --32` and `ld -m elf_i386` (binutils only: no i386 libc
 * is needed). */
	.globl _start
	.text
_start:
	movl $4, %eax		/* write(1, ready, 6) */
	movl $1, %ebx
	movl $ready, %ecx
	movl $6, %edx
	int $0x80
	movl $3, %eax		/* read(0, buf, 64) */
	movl $0, %ebx
	movl $buf, %ecx
	movl $64, %edx
	int $0x80
	cmpl $0, %eax
	jle fail
	movl $4, %eax		/* write(1, bye, 4) */
	movl $1, %ebx
	movl $bye, %ecx
	movl $4, %edx
	int $0x80
	movl $1, %eax		/* exit(0) */
	movl $0, %ebx
	int $0x80
fail:
	movl $1, %eax		/* exit(1): stdin closed */
	movl $1, %ebx
	int $0x80

	.data
ready:	.ascii "ready\n"
bye:	.ascii "bye\n"
	.bss
	.lcomm buf, 64
