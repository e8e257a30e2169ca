// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The eBPF program behind perf.Calls: it records one process's memory
 * syscalls (mmap, munmap, mremap, brk, madvise, mprotect) with their
 * arguments, result, user registers and a copy of the top of the stack,
 * one record per call in a ring buffer arenactl reads; and, where asked, the
 * changes of its file and shmem page counters (rss_stat, below).
 *
 * The calls' programs run at the exit of those six syscalls only: one per syscall,
 * attached to its own tracepoint (syscalls:sys_exit_mmap and so on); the
 * user registers saved at entry, where the arguments are, come from the
 * task (bpf_task_pt_regs, Linux 5.15). No other syscall runs them, but
 * while any syscall tracepoint is enabled, every task on the machine takes
 * the slow syscall path
 * (SYSCALL_WORK_SYSCALL_TRACEPOINT, kernel/tracepoint.c syscall_regfunc),
 * where the exit's tracepoint checks the syscall's number against those
 * enabled (kernel/trace/trace_syscalls.c perf_syscall_exit) and returns.
 * fexit programs on the syscalls' wrappers would spare other syscalls
 * even that, but need ftrace, which some kernels refuse (this project's
 * test machines do: EPERM).
 *
 * Built by go generate in internal/perf (bpf2go); TestCallsProgramIsBuilt-
 * FromSource checks that the committed object is what this file makes. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Which syscall a program caught (the bit of whole_kinds). */
enum { KIND_MMAP, KIND_MUNMAP, KIND_MREMAP, KIND_BRK, KIND_MADVISE, KIND_MPROTECT };

/* The stack copies: a short one unwinds most calls past the syscall's
 * wrapper and its caller; a whole one is as large as perf's. */
#define SHORT_STACK 256
#define WHOLE_STACK 8192
/* A call copied whole while the ring is nearly empty (k is 0: a process
 * that calls rarely), or forced whole, gets a deeper copy: such calls are
 * where a server's rare, deep paths grow its heaps (mprotect from
 * grow_heap under a DROP TABLE, 11-13 frames into an 8 KiB copy on
 * MariaDB), gone from the thread's stack before arenactl reads it. The
 * copies a ring holds before k rises are bounded by thin_step, so a
 * process that maps in a loop pays for at most one such copy a drain. */
#define DEEP_STACK 32768
#define MAX_THIN 8
#define PAGE 4096

/* The user registers saved at entry, as the kernel's struct pt_regs begins
 * (bpf_task_pt_regs). On x86_64 it is user_regs_struct's first 21 words,
 * orig_rax (the syscall's number) among them. On aarch64 it is struct
 * user_pt_regs (x0..x30, sp, pc, pstate), then orig_x0 (the first
 * argument: x0 is the result by now) and syscallno
 * (arch/arm64/include/asm/ptrace.h, struct pt_regs); bpf_tracing.h reads
 * it as user_pt_regs under __TARGET_ARCH_arm64, which bpf2go's -target
 * arm64 defines. */
#if defined(__TARGET_ARCH_arm64)
struct call_regs {
	struct user_pt_regs user;
	__u64 orig_x0;
	__s32 syscallno;
	__u32 unused;
};
#else
#define call_regs pt_regs
#endif

/* A record: the call, then stack_len bytes of stack from the user sp. */
struct call {
	__u64 time; /* CLOCK_MONOTONIC, as perf's samples are stamped */
	__u32 tgid, tid; /* as arenactl's pid namespace numbers them */
	__u32 stack_len;
	__u32 flags; /* bit 0: whole copy; bit 1: forced whole; bit 2: an
		      * rss_stat record; bits 8-15: k; bits 16-23: its counter */
	__s64 ret;
	struct call_regs regs; /* the user registers saved at entry */
};
/* So that struct call is in the object's BTF, for bpf2go's Go type. */
const struct call *unused_call __attribute__((unused));

/* The ring; its size is set by arenactl before loading. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} calls SEC(".maps");

/* Set before loading (the verifier takes them as constants). */
const volatile __u32 target_tgid;
/* The target's start: clock ticks after boot as /proc/PID/stat says
 * (fs/proc/array.c: nsec_to_clock_t(timens_add_boottime_ns(
 * start_boottime))): a later process given the same PID starts later. */
const volatile __u64 target_start;
const volatile __u64 tick_ns;
const volatile __u64 boot_offset; /* arenactl's time namespace's */
/* arenactl's pid namespace, where it is not the host's (0: the host's). */
const volatile __u64 pidns_dev, pidns_ino;
const volatile __u64 whole_from; /* a length that forces a whole copy */
const volatile __u32 whole_kinds; /* kinds always copied whole */
const volatile __u64 thin_step;

/* Written while loaded: armed while the window is open; calls that found
 * the ring full. */
__u32 armed;
__u64 lost;

/* What the program reads of a task: CO-RE relocates the fields to the
 * running kernel's layout (its BTF). */
struct task_struct {
	struct task_struct *group_leader;
	__u64 start_boottime;
	struct mm_struct *mm;
} __attribute__((preserve_access_index));

/* The page counters of a process (include/linux/mm_types.h, struct
 * mm_struct's rss_stat: a percpu_counter per counter since Linux 6.2):
 * a shared part, and a part per CPU (include/linux/percpu_counter.h),
 * folded into the shared one once it reaches percpu_counter_batch pages. */
struct percpu_counter {
	__s64 count;
	__s32 *counters; /* __percpu */
} __attribute__((preserve_access_index));
struct mm_struct {
	struct percpu_counter rss_stat[4];
} __attribute__((preserve_access_index));
/* An array map (include/linux/bpf.h): a per-CPU one's values are per-CPU
 * memory, pptrs[key]. */
struct bpf_array {
	void *pptrs[1]; /* __percpu */
} __attribute__((preserve_access_index));

/* Whether the current task is one of the target's threads, and its ids. */
static __always_inline int mine(struct task_struct *task, __u32 *tgid, __u32 *tid)
{
	if (pidns_ino) {
		struct bpf_pidns_info ns;
		if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)))
			return 0; /* not of that namespace: not the target */
		*tgid = ns.tgid;
		*tid = ns.pid;
	} else {
		__u64 pt = bpf_get_current_pid_tgid();
		*tgid = pt >> 32;
		*tid = (__u32)pt;
	}
	if (*tgid != target_tgid)
		return 0;
	/* A BTF pointer: read directly, no helper call. */
	__u64 start = task->group_leader->start_boottime;
	return (start + boot_offset) / tick_ns == target_start;
}

/* Copies the stack: want bytes, else what is left of sp's page and the
 * next (whole copies only), else of sp's page: a stack whose top is
 * nearer than the copy's size to its mapping's end cannot be read whole. */
static __always_inline __u32 copy_stack(void *dst, __u64 sp, int whole)
{
	__u32 left = ((~sp) & (PAGE - 1)) + 1;
	if (whole == 2) {
		/* Page by page, so that a stack shallower than the copy
		 * (most are) gives all it has rather than failing whole:
		 * the rest of sp's page, then whole pages until one cannot
		 * be read or the copy is full. */
		if (bpf_probe_read_user(dst, left, (void *)sp))
			return 0;
		__u32 n = left;
#pragma unroll
		for (int i = 0; i < DEEP_STACK / PAGE - 1; i++) {
			/* At most 4096 + 6 * 4096 = DEEP_STACK - PAGE; the mask
			 * (a no-op) is the bound the verifier can see, and the
			 * record has a page of room past DEEP_STACK for it. */
			__u32 off = (left + i * PAGE) & (DEEP_STACK - 1);
			if (bpf_probe_read_user(dst + off, PAGE, (void *)(sp + off)))
				break;
			n = off + PAGE;
		}
		return n;
	}
	if (whole) {
		if (!bpf_probe_read_user(dst, WHOLE_STACK, (void *)sp))
			return WHOLE_STACK;
		if (!bpf_probe_read_user(dst, left + PAGE, (void *)sp))
			return left + PAGE;
		if (!bpf_probe_read_user(dst, left, (void *)sp))
			return left;
		return 0;
	}
	if (!bpf_probe_read_user(dst, SHORT_STACK, (void *)sp))
		return SHORT_STACK;
	left = ((~sp) & (SHORT_STACK - 1)) + 1;
	if (!bpf_probe_read_user(dst, left, (void *)sp))
		return left;
	return 0;
}

static __always_inline void fill(struct call *c, const struct call_regs *regs, long ret, __u32 tgid,
				 __u32 tid, __u32 flags)
{
	c->tgid = tgid;
	c->tid = tid;
	c->flags = flags;
	c->ret = ret;
#if defined(__TARGET_ARCH_arm64)
	/* Member by member: the verifier checks each load from the task's
	 * pt_regs against the kernel's BTF, and a copy of the whole
	 * struct would read syscallno (an s32) with the padding after it
	 * as one 8-byte word. */
	__builtin_memcpy(&c->regs.user, &regs->user, sizeof(regs->user));
	c->regs.orig_x0 = regs->orig_x0;
	c->regs.syscallno = regs->syscallno;
	c->regs.unused = 0;
#else
	__builtin_memcpy(&c->regs, regs, sizeof(*regs));
#endif
	c->time = bpf_ktime_get_ns();
}

/* A syscall exit tracepoint's record (kernel/trace/trace_syscalls.c:
 * struct syscall_trace_exit; its format file in tracefs, checked by
 * arenactl before loading). */
struct sys_exit {
	__u64 common;
	__s32 nr;
	__s64 ret;
};

/* What every program returns: 1, so that the tracepoint's perf events
 * still get their records. A tracepoint program's result gates the
 * tracepoint's perf output for every perf user on the machine
 * (kernel/trace/trace_syscalls.c perf_syscall_exit, after
 * perf_call_bpf_exit; kernel/trace/bpf_trace.c trace_call_bpf): with 0,
 * while a growth window was open, perf trace, perf record -e
 * syscalls:sys_exit_mmap and another arenactl's growth --tracepoints
 * silently lost every exit of these six syscalls, on every process. */
#define KEEP_FOR_PERF 1

static __always_inline void record(struct sys_exit *ctx, int kind)
{
	__u32 tgid, tid;
	if (!armed)
		return;
	struct task_struct *task = bpf_get_current_task_btf();
	if (!mine(task, &tgid, &tid))
		return;
	long ret = ctx->ret;
	/* A BTF pointer too: its registers are read where they are. */
	const struct call_regs *regs = (const void *)bpf_task_pt_regs(task);
	/* A whole copy for the kinds asked (brk: rare, and the main heap's
	 * growth) and large lengths (mremap's new one too); else with chance
	 * 2^-k, k the ring's unread bytes over thin_step: a process that calls
	 * rarely has every stack whole, one that calls in a loop most short. */
	__u32 flags = 0;
	if (whole_kinds >> kind & 1)
		flags = 3;
	else if (kind != KIND_BRK && (PT_REGS_PARM2_SYSCALL(regs) >= whole_from ||
				      (kind == KIND_MREMAP && PT_REGS_PARM3_SYSCALL(regs) >= whole_from)))
		flags = 3;
	else {
		__u64 k = bpf_ringbuf_query(&calls, BPF_RB_AVAIL_DATA) / thin_step;
		if (k > MAX_THIN)
			k = MAX_THIN;
		if (k == 0 || (bpf_get_prandom_u32() & ((1u << k) - 1)) == 0)
			flags = 1 | k << 8;
	}
	__u64 sp = PT_REGS_SP(regs);
	struct call *c;
	if ((flags & 2) || flags == 1) {
		c = bpf_ringbuf_reserve(&calls, sizeof(*c) + DEEP_STACK + PAGE, 0);
		if (c) {
			fill(c, regs, ret, tgid, tid, flags);
			c->stack_len = copy_stack(c + 1, sp, 2);
			bpf_ringbuf_submit(c, BPF_RB_NO_WAKEUP);
			return;
		}
	}
	if (flags) {
		c = bpf_ringbuf_reserve(&calls, sizeof(*c) + WHOLE_STACK, 0);
		if (c) {
			fill(c, regs, ret, tgid, tid, flags);
			c->stack_len = copy_stack(c + 1, sp, 1);
			/* No wakeup: the reader polls. */
			bpf_ringbuf_submit(c, BPF_RB_NO_WAKEUP);
			return;
		}
		/* No room for a whole copy: a short one still records the
		 * call (its chance of a whole copy was a little less than
		 * 2^-k then, near a full ring only). */
	}
	c = bpf_ringbuf_reserve(&calls, sizeof(*c) + SHORT_STACK, 0);
	if (!c) {
		__sync_fetch_and_add(&lost, 1);
		return;
	}
	fill(c, regs, ret, tgid, tid, 0);
	c->stack_len = copy_stack(c + 1, sp, 0);
	bpf_ringbuf_submit(c, BPF_RB_NO_WAKEUP);
}

/* Where each CPU's per-CPU memory is: its offset from the per-CPU address
 * (the kernel's __per_cpu_offset, which it does not name to eBPF). A
 * per-CPU map's value is found at per_cpu_ptr(pptr, cpu)
 * (kernel/bpf/arraymap.c, percpu_array_map_lookup_percpu_elem): that less
 * pptr is the offset. Learnt at the first count, for every possible CPU,
 * each kept with its low bit set (offsets are aligned): an entry says
 * itself whether it is known, so that another CPU's count never reads one
 * half written, whatever order a weakly ordered machine shows the stores
 * in. */
#define MAX_CPUS 1024
#define OFF_KNOWN 1
const volatile __u32 ncpus; /* possible CPUs, 0 to ncpus - 1 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cpu_probe SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, __u64);
} cpu_off SEC(".maps");

/* A pointer's value as a number: read back from where it was spilled (the
 * verifier allows no arithmetic on a map's pointer). */
static __always_inline __u64 address(void *p)
{
	__u64 v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), &p);
	return v;
}

static __always_inline int learn_cpu_offsets(void)
{
	__u64 pptr;
	__u32 key = 0;
	struct bpf_array *a = (void *)address(&cpu_probe);
	if (bpf_probe_read_kernel(&pptr, sizeof(pptr), &a->pptrs[0]))
		return -1;
	for (__u32 c = 0; c < MAX_CPUS && c < ncpus; c++) {
		void *v = bpf_map_lookup_percpu_elem(&cpu_probe, &key, c);
		if (!v)
			return -1;
		__u64 off = (address(v) - pptr) | OFF_KNOWN;
		__u32 k = c;
		bpf_map_update_elem(&cpu_off, &k, &off, 0);
	}
	return 0;
}

/* The counter's value as percpu_counter_sum has it (lib/percpu_counter.c):
 * its shared part and every CPU's, read without its lock. */
static __always_inline int counter_sum(struct percpu_counter *fbc, __s64 *sum)
{
	__s64 n;
	__u64 counters;
	if (bpf_probe_read_kernel(&n, sizeof(n), &fbc->count) ||
	    bpf_probe_read_kernel(&counters, sizeof(counters), &fbc->counters))
		return -1;
	__u32 k0 = 0;
	__u64 *off0 = bpf_map_lookup_elem(&cpu_off, &k0);
	if (!off0 || (!(*off0 & OFF_KNOWN) && learn_cpu_offsets()))
		return -1;
	for (__u32 c = 0; c < MAX_CPUS && c < ncpus; c++) {
		__u32 k = c;
		__u64 *off = bpf_map_lookup_elem(&cpu_off, &k);
		__s32 v;
		/* Another CPU is still learning: this change is left out,
		 * its pages in the next one's value. */
		if (!off || !(*off & OFF_KNOWN) ||
		    bpf_probe_read_kernel(&v, sizeof(v), (void *)(counters + (*off & ~(__u64)OFF_KNOWN))))
			return -1;
		n += v;
	}
	*sum = n;
	return 0;
}

/* The counters rss_stat reports (include/linux/mm_types_task.h:
 * MM_FILEPAGES, MM_SHMEMPAGES), and the flags of its records. */
#define MM_FILEPAGES 0
#define MM_SHMEMPAGES 3
#define FLAG_RSS 4

/* Each change of a process's page counters (include/trace/events/kmem.h,
 * rss_stat: mm, member; Linux 6.2), of every process: a raw tracepoint, so
 * that the kernel builds no record. Its perf tracepoint sums every CPU's
 * part of the counter under the counter's lock for every change, anonymous
 * faults too, before a filter drops them: on a process touching new pages
 * that was about 100 ns a fault here, and the lock is one per process and
 * counter on a machine of many CPUs. This keeps only the target's own
 * changes of its file and shmem counters (a fault's fault-around or large
 * folio: 16 pages or more at once) and writes a record like a call's: the
 * counter's new value as ret (in pages, summed as the tracepoint does),
 * the fault's registers and a whole stack copy. */
static __always_inline void rss_record(struct bpf_raw_tracepoint_args *ctx, int given)
{
	__u64 member = ctx->args[1];
	if (!armed || (member != MM_FILEPAGES && member != MM_SHMEMPAGES))
		return;
	struct task_struct *task = bpf_get_current_task_btf();
	struct mm_struct *mm = (void *)ctx->args[0];
	__u64 cur;
	if (bpf_probe_read_kernel(&cur, sizeof(cur), &task->mm) || cur != ctx->args[0])
		return; /* another process's counters (reclaim, say) */
	__u32 tgid, tid;
	if (!mine(task, &tgid, &tid))
		return;
	__s64 count;
	if (given)
		count = ctx->args[2];
	else if (counter_sum(member == MM_FILEPAGES ? &mm->rss_stat[MM_FILEPAGES] : &mm->rss_stat[MM_SHMEMPAGES], &count))
		return;
	if (count < 0)
		count = 0; /* percpu_counter_sum_positive */
	struct call *c = bpf_ringbuf_reserve(&calls, sizeof(*c) + WHOLE_STACK, 0);
	if (!c) {
		__sync_fetch_and_add(&lost, 1);
		return;
	}
	const struct call_regs *regs = (const void *)bpf_task_pt_regs(task);
	fill(c, regs, count, tgid, tid, 1 | FLAG_RSS | member << 16);
	c->stack_len = copy_stack(c + 1, PT_REGS_SP(regs), 1);
	bpf_ringbuf_submit(c, BPF_RB_NO_WAKEUP);
}

SEC("raw_tracepoint/rss_stat")
int rss_stat(struct bpf_raw_tracepoint_args *ctx)
{
	rss_record(ctx, 0);
	return 0;
}

/* Before Linux 6.2 the tracepoint passed the counter's value itself (mm,
 * member, count: an atomic_long then, no per-CPU parts), and the program
 * takes it as given. arenactl loads the one the kernel's BTF says fits
 * (btf_trace_rss_stat's arguments). */
SEC("raw_tracepoint/rss_stat")
int rss_stat_count(struct bpf_raw_tracepoint_args *ctx)
{
	rss_record(ctx, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mmap")
int exit_mmap(struct sys_exit *ctx)
{
	record(ctx, KIND_MMAP);
	return KEEP_FOR_PERF;
}

SEC("tracepoint/syscalls/sys_exit_munmap")
int exit_munmap(struct sys_exit *ctx)
{
	record(ctx, KIND_MUNMAP);
	return KEEP_FOR_PERF;
}

SEC("tracepoint/syscalls/sys_exit_mremap")
int exit_mremap(struct sys_exit *ctx)
{
	record(ctx, KIND_MREMAP);
	return KEEP_FOR_PERF;
}

SEC("tracepoint/syscalls/sys_exit_brk")
int exit_brk(struct sys_exit *ctx)
{
	record(ctx, KIND_BRK);
	return KEEP_FOR_PERF;
}

SEC("tracepoint/syscalls/sys_exit_madvise")
int exit_madvise(struct sys_exit *ctx)
{
	record(ctx, KIND_MADVISE);
	return KEEP_FOR_PERF;
}

SEC("tracepoint/syscalls/sys_exit_mprotect")
int exit_mprotect(struct sys_exit *ctx)
{
	record(ctx, KIND_MPROTECT);
	return KEEP_FOR_PERF;
}
