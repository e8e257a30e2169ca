/* The layout of the call site arenactl places in a target, shared by the
 * routines of every architecture (site_amd64.S, site_arm64.S) and, through
 * the Go constants blob/gen.sh makes of it (layout.go), by internal/ptrace,
 * which says what each word means. Offsets are from the site's start; the
 * code page is at CODE_OFF, so the routines reach a header word at
 * H(off), relative to their own first instruction. Only #define lines of
 * the form "#define NAME value" become Go constants. */

/* page 0: the header */
#define HDR_VERSION 0x08
#define HDR_CREATOR 0x10
#define HDR_START 0x18
#define HDR_TID 0x20
#define HDR_PENDING 0x28
#define HDR_DONE 0x30
#define HDR_RESULT 0x38
#define HDR_RESTORED 0x40
#define HDR_FRAME_SP 0x48
#define HDR_RFBM 0x50
#define HDR_TIMEOUT 0x60
#define HDR_IMAGE_PID 0x70
#define HDR_BEAT 0x78
#define HDR_SIG_ALL 0x80
#define HDR_SIG_OLD 0x88
#define HDR_BEAT_TS 0x90
#define HDR_REAPER 0xa0
#define HDR_MAPS_PATH 0xc0
#define REGS_OFF 0x100
#define HDR_LOCK_STATE 0x1a0
#define HDR_LOCK_RELEASE 0x1a8
#define HDR_LOCK_TS 0x1b0
#define JOURNAL_OFF 0x200
#define JOURNAL_SIZE 0x200
#define LEAVE_COUNT 0x400
#define LEAVE_QUERY 0x410
#define LEAVE_ENTRIES 0x480
#define LEAVE_ENTRY 0x30
/* page 1: the code; page 2 on: the thread's extended state (x86_64: its
 * XSAVE area, for xrstor; aarch64: a whole rt_sigframe, general registers
 * and FP/SIMD state, which the routine's rt_sigreturn restores) */
#define CODE_OFF 0x1000
#define XSAVE_OFF 0x2000
/* aarch64's kernels use 4, 16 or 64 KiB pages (arch/arm64/Kconfig,
 * ARM64_4K_PAGES, ARM64_16K_PAGES, ARM64_64K_PAGES): its site spaces its
 * parts by the largest, ARM64_PAGE, so that one layout (and one code
 * image, whose adr offsets are fixed when it is assembled) can be mapped
 * and mprotected under any of them. site_arm64.S takes ARM64_CODE_OFF as
 * its CODE_OFF. */
#define ARM64_PAGE 0x10000
#define ARM64_CODE_OFF 0x10000
#define FRAME_OFF 0x20000

/* How long the gate waits for arenactl after a call (a timespec). */
#define GATE_SEC 1
#define GATE_NSEC 0
/* The image's heartbeat poll and how many unchanged polls end it. */
#define IMAGE_TICK_NSEC 100000000
#define IMAGE_TICKS 20
/* One poll of the lock routine while it holds the lock. */
#define LOCK_TICK_NSEC 100000
#define LOCK_STATE_HOLDING 1
#define LOCK_STATE_LETTING_GO 2

/* The kernel's constants the routines pass (linux/sched.h, linux/wait.h,
 * linux/prctl.h, linux/futex.h, asm-generic/mman-common.h,
 * linux/signal.h, linux/fcntl.h, linux/fs.h PROCMAP_QUERY and its struct
 * procmap_query's fields); the same on x86_64 and aarch64. */
#define CLONE_VM_ 0x100
#define CLONE_VFORK_ 0x4000
#define CLONE_UNTRACED_ 0x800000
#define SIGCHLD_ 17
#define WALL_ 0x40000000
#define PR_GET_CHILD_SUBREAPER_ 37
#define FUTEX_WAIT_PRIVATE_ 128
#define FUTEX_WAKE_PRIVATE_ 129
#define SIG_SETMASK_ 2
#define MADV_DONTFORK_ 10
#define MADV_DOFORK_ 11
#define AT_FDCWD_ -100
#define O_RDONLY_CLOEXEC_ 0x80000
#define PROCMAP_QUERY_ 0xc0686611
#define QUERY_ADDR_OFF 16
#define QUERY_START_OFF 24
#define QUERY_END_OFF 32
#define EINTR_ 4
