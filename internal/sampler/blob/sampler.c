/* The heap sampler arenactl places in a target (issue 9): hooks for the
 * malloc family that the target's GOT entries are pointed at.
 *
 * Built freestanding and position independent into a flat image
 * (gen.sh), one for x86_64 and one for aarch64: no libc, no relocations,
 * every global reached pc-relative (rip-relative; adrp on aarch64).
 * arenactl maps the image, fills in `cfg` (the real functions, the mean
 * sampling interval's exponential draws, the ring's size), and points GOT
 * entries at the h_* hooks.
 *
 * Fast path (every call): a per-thread byte counter, found by hashing the
 * thread pointer (no TLS of the target's is used: its threads exist
 * already), is decreased by the size; while it stays non-negative the hook
 * jumps on to glibc. free checks a 4-way set of sampled addresses. Nothing
 * traps, locks or makes a syscall.
 *
 * Slow path (one call in about `rate` bytes, and the free of a sampled
 * block): the real function is called, then a record (kind, size, address,
 * thread, the caller's registers, a copy of the top of its stack made with
 * process_vm_readv on itself, which returns short instead of faulting past
 * the stack's end) is written into a ring that arenactl drains. A ring
 * more than half full takes a record only with a chance that falls as it
 * fills (emit); the others, and all of a full ring's, go to a second ring
 * the top of its stack (SHORT_COPY): every
 * sample is kept with its size, address and caller, and arenactl
 * completes a short stack from the full ones of the same calls. Only
 * when both are full is a sample dropped, and counted. Nothing ever
 * waits for arenactl.
 *
 * When the short ring is more than half full (arenactl cannot keep up:
 * 16 threads allocating flat out on 2 CPUs outran a drain that had only
 * its fair share of them, issue 28), the mean interval doubles
 * (cfg.shift), at most once per eighth of the ring taken: the intervals
 * drawn from then on are twice as long, and each record says the shift
 * of the interval that ended in it, so that arenactl weights it by the
 * rate it was taken at and the estimates stay unbiased. arenactl halves
 * it again once its drains keep up. A thread's interval drawn before a
 * change runs out at its own rate (a memoryless draw: the rest of it is
 * as long as a fresh one of that rate).
 *
 * The free of a sampled block goes to a ring of its own, of small records,
 * which cannot fill: a lost free would show a freed block as held, a leak
 * that is not there. Every free undoes one tracked block, and at most
 * NSETS*WAYS blocks are tracked, plus the allocations recorded since
 * arenactl last read the free ring (it reads it before the other, so at
 * most two rings' worth): FREE_SLOTS is twice that. Both kinds of record
 * carry a stamp from one clock, taken before a block is given back and
 * after one is handed out, so that arenactl can tell which of two blocks
 * at one address a free was for when the rings' records arrive apart.
 *
 * A realloc that moves a sampled block records a move (a free record with
 * the new address), and the new address is watched instead: the block is
 * the same, and what its earlier samples counted stays held (issue 29).
 * A move is not bounded as a free is (a block moved again and again adds
 * a record each time, with no allocation between); a lost one is counted
 * as a lost free. A sampled realloc records the usable size of the block
 * it was given (read from its chunk header before glibc's realloc runs),
 * so that arenactl counts what the call added to the block, not the
 * whole block.
 *
 * After a fork the child has private copies of all of this: its records go
 * to its own ring, which nobody reads; the parent's ring is untouched. */

typedef unsigned long u64;
typedef long i64;
typedef unsigned int u32;
typedef __SIZE_TYPE__ size_t;

#define COUNTER_BITS 12
#define NCOUNTERS (1 << COUNTER_BITS)
#define SET_BITS 14
#define FILTER_BITS 15
#define NSETS (1 << SET_BITS)
#define WAYS 4
#define NDRAWS 4096
#define STACK_COPY 8192
#define SHORT_COPY 376 /* a short record is 512 bytes */
#define MAXPATCHES 2048
#define MAX_SHIFT 10 /* the mean interval at most 1024 times the rate */
#define FREE_SLOTS (1 << 17)

enum { K_MALLOC = 1, K_CALLOC, K_REALLOC, K_REALLOCARRAY, K_POSIX_MEMALIGN, K_ALIGNED_ALLOC, K_MEMALIGN, K_VALLOC, K_PVALLOC, K_FREE };

#if defined(__aarch64__)
struct regs { /* as the capture stubs store them */
	u64 sp; /* sp at the hook's entry: the caller's, as after the return */
	u64 x29, x30, x19, x20, x21, x22; /* x30: the return address */
};
#else
struct regs { /* as the capture stubs push them */
	u64 sp; /* rsp at the hook's entry: the return address is there */
	u64 rbx, rbp, r12, r13, r14, r15;
};
#endif

/* One record of the ring. `seq` is written last: arenactl takes a record
 * whose seq is its index + 1. */
struct record {
	u64 seq;
	u32 kind;
	u32 flags; /* 1: no room in the address set, its free will not be seen;
		    * bits 8-15: k, a ring more than half full took this
		    * record with chance 2^-k (the others went short);
		    * bits 16-23: the shift of the interval that ended in
		    * this sample (its mean was rate << shift) */
	u64 addr, size;
	u64 tid; /* the thread's id; above it, a realloc's that moved a
		  * sampled block: the low half of the move's stamp (its
		  * free record's), so that arenactl can tell its move from
		  * a later one between the same two addresses */
	u64 pc, sp;
	u64 saved[6]; /* x86_64: rbx, rbp, r12..r15; aarch64: x29, x30, x19..x22 */
	u64 stack_len;
	u64 old_addr; /* realloc: the block given back */
	u64 stamp;
	u64 old_size; /* realloc: old_addr's usable bytes, from its chunk header */
	unsigned char stack[STACK_COPY];
};

/* The free of a sampled block, or its move by realloc to `to`; `seq` as
 * in struct record. */
struct freerec {
	u64 seq;
	u64 addr;
	u64 stamp;
	u64 to; /* 0: freed */
};

struct config {
	u64 magic;
	u64 version;
	u64 enabled;     /* 0 after detach: the slow path only calls through */
	u64 ring_slots;  /* a power of two */
	struct record *ring;
	volatile u64 head; /* next slot to reserve (target) */
	volatile u64 tail; /* next slot arenactl will read (arenactl) */
	volatile u64 dropped;
	volatile u64 inflight; /* threads in a slow path */
	volatile u64 draw;
	volatile u64 untracked;
	i64 draws[NDRAWS]; /* exponential intervals, mean `rate`, in bytes */
	/* Who made it and what it changed, for a later arenactl to undo if
	 * this one was killed: the GOT entries it rewrote, with their
	 * original contents. */
	u64 creator_pid, creator_start;
	u64 image_size; /* the whole mapping, ring included */
	u64 npatches;
	struct {
		u64 slot, orig, hook;
	} patches[MAXPATCHES];
	/* Added after the fields a later arenactl reads of a killed run's
	 * sampler, which stay where they were. */
	volatile u64 clock;
	struct freerec *frees; /* FREE_SLOTS records */
	volatile u64 fhead, ftail;
	volatile u64 fdropped; /* never, unless the bound above is wrong */
	/* Samples written to the short ring (a ring more than half full
	 * passed them on; dropped, above, are those both rings lost). */
	volatile u64 shortened;
	struct record *shorts; /* short_slots records of shortsize bytes */
	u64 short_slots;       /* a power of two */
	volatile u64 shead, stail;
	/* The mean interval is `rate` << shift; shift_head is the short
	 * ring's slot at its last rise. */
	volatile u64 shift, shift_head;
};

/* A short record is a record's header and SHORT_COPY bytes of stack. */
#define SHORT_SIZE (__builtin_offsetof(struct record, stack) + SHORT_COPY)

/* The real functions, one hidden global each so the hooks reach them
 * rip-relative. */
#define REAL(name) __attribute__((visibility("hidden"))) void *r_##name
REAL(malloc);
REAL(calloc);
REAL(realloc);
REAL(reallocarray);
REAL(posix_memalign);
REAL(aligned_alloc);
REAL(memalign);
REAL(valloc);
REAL(pvalloc);
REAL(free);

__attribute__((visibility("hidden"))) struct config cfg = {.magic = 0x524c504d41535241ull /* "ARSAMPLR" */, .version = 1};
__attribute__((visibility("hidden"))) i64 counters[NCOUNTERS];
/* The shift each counter's interval was drawn with. */
__attribute__((visibility("hidden"))) volatile unsigned char shifts[NCOUNTERS];
__attribute__((visibility("hidden"))) volatile u64 sampled[NSETS][WAYS];
/* How many sampled blocks hash to each byte (255: many, never decreased):
 * free's fast path reads one byte of this 32 KiB table, which stays in
 * the L1 cache, and looks at the sets only when it is not zero. */
__attribute__((visibility("hidden"))) volatile unsigned char filter[1 << FILTER_BITS];

/* A thread's counter: its thread pointer (the top of its stack, glibc's
 * TCB) in 4 KiB units plus in 2 MiB units, modulo NCOUNTERS. Threads'
 * TCBs are pages apart; over evenly spaced stacks of 16 KiB to 32 MiB
 * (and a guard page) the sum gives 256 threads 256 counters. In 2 MiB
 * units alone, threads with stacks smaller than that shared a counter:
 * two that see it run out both sample, and 4 threads of 64 KiB stacks
 * at 3 GB/s came out 5 % high (issue 18). */
static inline u64 thread_slot(void) {
	u64 tp;
#if defined(__aarch64__)
	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
#else
	__asm__("mov %%fs:0, %0" : "=r"(tp));
#endif
	return ((tp >> 12) + (tp >> 21)) & (NCOUNTERS - 1);
}

static inline u64 set_of(u64 a) { return (a * 0x9e3779b97f4a7c15ull) >> (64 - SET_BITS); }

/* Blocks are 16-byte aligned: consecutive ones get consecutive bytes. */
static inline u64 filter_of(u64 a) { return (a >> 4) & ((1 << FILTER_BITS) - 1); }

static void filter_add(u64 a, int d) {
	volatile unsigned char *f = &filter[filter_of(a)];
	unsigned char v = *f;
	while (v != 255 && !(d < 0 && v == 0)) {
		if (__atomic_compare_exchange_n(f, &v, (unsigned char)(v + d), 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
	}
}

#if defined(__aarch64__)
/* aarch64's syscall convention: the number in x8, arguments x0..x5, the
 * result in x0 (Linux's arch/arm64 and include/uapi/asm-generic/unistd.h
 * numbers). */
#define NR_GETTID 178
#define NR_GETPID 172
#define NR_PROCESS_VM_READV 270
static inline long sys6(long nr, long a, long b, long c, long d, long e, long f) {
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
	return x0;
}
#else
#define NR_GETTID 186
#define NR_GETPID 39
#define NR_PROCESS_VM_READV 310
static inline long sys6(long nr, long a, long b, long c, long d, long e, long f) {
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9) : "rcx", "r11", "memory");
	return ret;
}
#endif

/* charge takes n bytes from this thread's counter: 1 when a sample is due. */
static inline int charge(u64 n) {
	i64 *c = &counters[thread_slot()];
	*c -= (i64)n;
	return *c < 0;
}

/* random gives 64 random bits: splitmix64 over a shared sequence that
 * arenactl seeds (cfg.draw), so that draws never repeat in a cycle. */
static inline u64 rnd64(void) {
	u64 x = __atomic_fetch_add(&cfg.draw, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* draw is one exponential interval, mean `rate`: a random one of
 * arenactl's table (quantiles of the distribution). Taken in a fixed
 * order, the table repeated every NDRAWS samples and a long window had
 * no more randomness than one cycle of it. */
static inline i64 draw(void) { return cfg.draws[rnd64() & (NDRAWS - 1)]; }

/* rearm sets the counter to the distance to the next sample point past
 * the block just sampled. The point one draw after the sampled one may
 * fall inside the block as well (a block larger than the draw): then the
 * distance past the block's end is, by memorylessness, a fresh draw. Not
 * the same one: reused, the draw known to be shorter than the rest of
 * the block made the next interval short and sampled the next calls too
 * often (issue 18: +14 % to +27 % behind realloc growth). */
static u32 rearm(void) {
	u64 slot = thread_slot();
	i64 *c = &counters[slot];
	u32 was = shifts[slot];
	u32 sh = (u32)__atomic_load_n(&cfg.shift, __ATOMIC_RELAXED);
	if (sh > MAX_SHIFT) sh = MAX_SHIFT;
	shifts[slot] = (unsigned char)sh;
	*c += draw() << sh;
	if (*c < 0) *c = draw() << sh;
	return was;
}

/* busier doubles the mean interval when the short ring, whose slot i was
 * just taken (or which was full, at i), is more than half full, unless it
 * did so less than an eighth of the ring ago. */
static void busier(u64 i) {
	if (i - cfg.stail <= cfg.short_slots / 2) return;
	u64 last = __atomic_load_n(&cfg.shift_head, __ATOMIC_RELAXED);
	if (i < last + cfg.short_slots / 8 || __atomic_load_n(&cfg.shift, __ATOMIC_RELAXED) >= MAX_SHIFT) return;
	if (__atomic_compare_exchange_n(&cfg.shift_head, &last, i, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		__atomic_fetch_add(&cfg.shift, 1, __ATOMIC_RELAXED);
}

static int track(u64 a) {
	volatile u64 *s = sampled[set_of(a)];
	for (int w = 0; w < WAYS; w++) {
		u64 zero = 0;
		if (__atomic_compare_exchange_n(&s[w], &zero, a, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			filter_add(a, 1);
			return 1;
		}
	}
	__atomic_fetch_add(&cfg.untracked, 1, __ATOMIC_RELAXED);
	return 0;
}

static inline int is_sampled(u64 a) {
	volatile u64 *s = sampled[set_of(a)];
	return s[0] == a || s[1] == a || s[2] == a || s[3] == a;
}

static int untrack(u64 a) {
	volatile u64 *s = sampled[set_of(a)];
	for (int w = 0; w < WAYS; w++) {
		u64 want = a;
		if (__atomic_compare_exchange_n(&s[w], &want, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			filter_add(a, -1);
			return 1;
		}
	}
	return 0;
}

struct iovec {
	void *base;
	u64 len;
};

static inline u64 tick(void) { return __atomic_add_fetch(&cfg.clock, 1, __ATOMIC_RELAXED); }

/* thinning is k for a ring with `used` of its slots taken: 0 up to half
 * full, then j(j+1)/2 once the room left has halved j times. The chance
 * of a whole record falls fast enough that the ring all but never fills
 * (with 16 slots, it takes about a thousand samples between two drains):
 * a sample a full ring turns away had no chance of a whole record, so
 * the whole ones could not stand for it when short stacks are completed
 * from them. Before (one more for every halving, and a drop when full),
 * a ring of 16 filled after 48 samples. */
static inline u32 thinning(u64 used) {
	if (used >= cfg.ring_slots) return 64; /* no room: a short record */
	u64 room = cfg.ring_slots - used;
	u32 j = 0;
	while (room <= (cfg.ring_slots >> (j + 1))) j++;
	u32 k = j * (j + 1) / 2;
	return k < 63 ? k : 63;
}

/* reserve takes a slot of a ring whose head and tail are given, if it
 * has room: an index taken and never written would stop arenactl's
 * reading there for good. */
static inline int reserve(volatile u64 *head, volatile u64 *tail, u64 slots, u64 *out) {
	u64 i = __atomic_load_n(head, __ATOMIC_RELAXED);
	do {
		if (i - *tail >= slots) return 0;
	} while (!__atomic_compare_exchange_n(head, &i, i + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	*out = i;
	return 1;
}

/* emit writes one record. It never waits. A ring more than half full
 * takes a record with chance 2^-k (thinning, k marked in it), a random
 * choice; the others go to the short ring, with the top SHORT_COPY bytes
 * of their stack. Where samples come in bursts the chance differs from
 * call to call, so each whole record stands for 2^k calls when arenactl
 * shares a short stack out among whole ones. Before, the ones not taken were
 * let go and the ones taken weighted by 2^k, and a full ring dropped
 * samples, which the records kept in the same drain were scaled to stand
 * for: a site whose calls come in bursts (short-lived threads) was then
 * under-counted (issue 18). A sample is dropped only when both rings are
 * full. A failed call (no block) is not recorded. */
static void emit(u32 kind, u64 addr, u64 size, u64 old, u64 old_size, u32 shift, const struct regs *r, u64 moved) {
	if (!addr) return;
	u64 stamp = tick();
	u32 k = thinning(__atomic_load_n(&cfg.head, __ATOMIC_RELAXED) - cfg.tail);
	struct record *rec;
	u64 i, copy = STACK_COPY;
	if (k < 64 && !(k && (rnd64() & ((1ull << k) - 1))) && reserve(&cfg.head, &cfg.tail, cfg.ring_slots, &i)) {
		rec = &cfg.ring[i & (cfg.ring_slots - 1)];
	} else if (reserve(&cfg.shead, &cfg.stail, cfg.short_slots, &i)) {
		rec = (struct record *)((unsigned char *)cfg.shorts + (i & (cfg.short_slots - 1)) * SHORT_SIZE);
		copy = SHORT_COPY;
		__atomic_fetch_add(&cfg.shortened, 1, __ATOMIC_RELAXED);
		busier(i);
	} else {
		__atomic_fetch_add(&cfg.dropped, 1, __ATOMIC_RELAXED);
		busier(__atomic_load_n(&cfg.shead, __ATOMIC_RELAXED));
		return;
	}
	rec->kind = kind;
	rec->flags = (copy == STACK_COPY ? k << 8 : 0) | shift << 16;
	rec->addr = addr;
	rec->size = size;
	rec->old_addr = old;
	rec->old_size = old_size;
	rec->stamp = stamp;
	rec->tid = (u64)(u32)sys6(NR_GETTID, 0, 0, 0, 0, 0, 0) | (moved & 0xffffffffull) << 32;
#if defined(__aarch64__)
	rec->sp = r->sp;
	rec->pc = r->x30;
	rec->saved[0] = r->x29;
	rec->saved[1] = r->x30;
	rec->saved[2] = r->x19;
	rec->saved[3] = r->x20;
	rec->saved[4] = r->x21;
	rec->saved[5] = r->x22;
#else
	rec->sp = r->sp + 8;
	rec->pc = *(u64 *)r->sp;
	rec->saved[0] = r->rbx;
	rec->saved[1] = r->rbp;
	rec->saved[2] = r->r12;
	rec->saved[3] = r->r13;
	rec->saved[4] = r->r14;
	rec->saved[5] = r->r15;
#endif
	rec->stack_len = 0;
	{
		struct iovec local = {rec->stack, copy};
		/* Partial transfers stop at an iovec: one per page, so a copy
		 * that would run past the stack's end stops there. */
		struct iovec remote[STACK_COPY / 4096 + 1];
		u64 from = rec->sp, left = copy;
		int n = 0;
		while (left && n < STACK_COPY / 4096 + 1) {
			u64 m = 4096 - (from & 4095);
			if (m > left) m = left;
			remote[n].base = (void *)from;
			remote[n].len = m;
			from += m;
			left -= m;
			n++;
		}
		long pid = sys6(NR_GETPID /* a forked child reads itself */, 0, 0, 0, 0, 0, 0);
		long got = sys6(NR_PROCESS_VM_READV, pid, (long)&local, 1, (long)remote, n, 0);
		if (got > 0) rec->stack_len = (u64)got;
	}
	/* A block a realloc kept in place, or moved (reallocated), is
	 * watched already. */
	if (addr && !is_sampled(addr) && !track(addr)) rec->flags |= 1;
	__atomic_store_n(&rec->seq, i + 1, __ATOMIC_RELEASE);
}

/* usable is the bytes a block handed out by glibc holds, from the size
 * field of its chunk header: the chunk's size less its own header, and
 * less the next chunk's prev_size too for a chunk mmapped of its own
 * (malloc/malloc.c, memsize and musable, glibc 2.35+; the same sizes
 * before). The caller of realloc passes a block of glibc's, whose header
 * glibc's realloc reads first too. */
static u64 usable(u64 a) {
	u64 v = *(volatile u64 *)(a - 8);
	u64 size = v & ~7ull;
	u64 over = (v & 2) ? 16 : 8; /* IS_MMAPPED */
	return size > over ? size - over : 0;
}

/* freed_to records the free of a sampled block, stamped before it was
 * given back to glibc (another thread may get the address next); with
 * `to`, its move there by realloc, the new address watched from now on. */
static void freed_to(u64 a, u64 stamp, u64 to) {
	if (!untrack(a)) return;
	if (to && !track(to)) to = 0; /* no room: as far as arenactl knows, it is freed */
	u64 i = __atomic_load_n(&cfg.fhead, __ATOMIC_RELAXED);
	do {
		if (i - cfg.ftail >= FREE_SLOTS) {
			__atomic_fetch_add(&cfg.fdropped, 1, __ATOMIC_RELAXED);
			return;
		}
	} while (!__atomic_compare_exchange_n(&cfg.fhead, &i, i + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	struct freerec *f = &cfg.frees[i & (FREE_SLOTS - 1)];
	f->addr = a;
	f->stamp = stamp;
	f->to = to;
	__atomic_store_n(&f->seq, i + 1, __ATOMIC_RELEASE);
}

static void freed(u64 a, u64 stamp) { freed_to(a, stamp, 0); }

/* reallocated records what became of a sampled block old that realloc was
 * given (p the block it returned, n the size asked): moved, freed
 * (realloc to 0 bytes), or still there (grown or shrunk in place, or the
 * call failed). */
static void reallocated(u64 old, u64 p, u64 n, u64 stamp) {
	if (p && p != old) freed_to(old, stamp, p);
	else if (!p && n == 0) freed(old, stamp);
}

#define ENTER() __atomic_fetch_add(&cfg.inflight, 1, __ATOMIC_ACQUIRE)
#define LEAVE() __atomic_fetch_sub(&cfg.inflight, 1, __ATOMIC_RELEASE)

/* The slow paths, called by the capture stubs with the caller's registers. */
__attribute__((used, visibility("hidden"))) void *s_malloc(size_t n, struct regs *r) {
	ENTER();
	void *p = ((void *(*)(size_t))r_malloc)(n);
	if (cfg.enabled) {
		u32 sh = rearm();
		emit(K_MALLOC, (u64)p, n, 0, 0, sh, r, 0);
	}
	LEAVE();
	return p;
}

__attribute__((used, visibility("hidden"))) void *s_calloc(size_t n, size_t m, struct regs *r) {
	ENTER();
	void *p = ((void *(*)(size_t, size_t))r_calloc)(n, m);
	if (cfg.enabled) {
		u32 sh = rearm();
		emit(K_CALLOC, (u64)p, n * m, 0, 0, sh, r, 0);
	}
	LEAVE();
	return p;
}

__attribute__((used, visibility("hidden"))) void *s_realloc(void *old, size_t n, struct regs *r) {
	ENTER();
	int was = old && is_sampled((u64)old);
	u64 stamp = was ? tick() : 0;
	int due = counters[thread_slot()] < 0;
	u64 had = old && due && cfg.enabled ? usable((u64)old) : 0;
	void *p = ((void *(*)(void *, size_t))r_realloc)(old, n);
	if (cfg.enabled) {
		if (was) reallocated((u64)old, (u64)p, n, stamp);
		if (due) {
			u32 sh = rearm();
			if (n) emit(K_REALLOC, (u64)p, n, (u64)old, had, sh, r, was && p && p != old ? stamp : 0);
		}
	}
	LEAVE();
	return p;
}

__attribute__((used, visibility("hidden"))) void *s_reallocarray(void *old, size_t n, size_t m, struct regs *r) {
	ENTER();
	int was = old && is_sampled((u64)old);
	u64 stamp = was ? tick() : 0;
	int due = counters[thread_slot()] < 0;
	u64 had = old && due && cfg.enabled ? usable((u64)old) : 0;
	void *p = ((void *(*)(void *, size_t, size_t))r_reallocarray)(old, n, m);
	if (cfg.enabled) {
		if (was && p) reallocated((u64)old, (u64)p, n * m, stamp);
		if (due) {
			u32 sh = rearm();
			emit(K_REALLOCARRAY, (u64)p, n * m, (u64)old, had, sh, r, was && p && p != old ? stamp : 0);
		}
	}
	LEAVE();
	return p;
}

__attribute__((used, visibility("hidden"))) int s_posix_memalign(void **out, size_t align, size_t n, struct regs *r) {
	ENTER();
	int e = ((int (*)(void **, size_t, size_t))r_posix_memalign)(out, align, n);
	if (cfg.enabled) {
		u32 sh = rearm();
		if (e == 0) emit(K_POSIX_MEMALIGN, (u64)*out, n, 0, 0, sh, r, 0);
	}
	LEAVE();
	return e;
}

#define ALIGNED(name, kind)                                                                        \
	__attribute__((used, visibility("hidden"))) void *s_##name(size_t align, size_t n, struct regs *r) { \
		ENTER();                                                                                   \
		void *p = ((void *(*)(size_t, size_t))r_##name)(align, n);                                                              \
		if (cfg.enabled) {                                                                         \
			u32 sh = rearm();                                                                       \
			emit(kind, (u64)p, n, 0, 0, sh, r, 0);                                             \
		}                                                                                          \
		LEAVE();                                                                                   \
		return p;                                                                                  \
	}
ALIGNED(aligned_alloc, K_ALIGNED_ALLOC)
ALIGNED(memalign, K_MEMALIGN)

#define ONE(name, kind)                                                                   \
	__attribute__((used, visibility("hidden"))) void *s_##name(size_t n, struct regs *r) { \
		ENTER();                                                                          \
		void *p = ((void *(*)(size_t))r_##name)(n);                                                            \
		if (cfg.enabled) {                                                                \
			u32 sh = rearm();                                                              \
			emit(kind, (u64)p, n, 0, 0, sh, r, 0);                                    \
		}                                                                                 \
		LEAVE();                                                                          \
		return p;                                                                         \
	}
ONE(valloc, K_VALLOC)
ONE(pvalloc, K_PVALLOC)

__attribute__((used, visibility("hidden"))) void s_free(void *p, struct regs *r) {
	ENTER();
	if (cfg.enabled) freed((u64)p, tick());
	((void (*)(void *))r_free)(p);
	LEAVE();
}

#if defined(__aarch64__)
/* aarch64: a hook is reached by the PLT's `br x17`, so x30 still holds
 * the caller's return address and sp the caller's stack pointer. The
 * capture stubs store sp, x29, x30 (the unwinder's pc, sp, fp and return
 * address) and x19..x22, and call the slow path with a pointer to them as
 * the argument after the function's own; the slow path keeps x19..x29
 * (callee-saved), the stub restores x30. Written as top-level assembly
 * (gcc 12 has no naked functions for aarch64). Each hook and stub starts with
 * `bti c` (hint #34: a nop where BTI is not implemented), a landing pad
 * for the indirect branch that reaches it should its page be guarded. */
#define FUNC(sym, body)                                                    \
	__asm__(".pushsection .text\n.p2align 2\n.globl " sym "\n.hidden " sym \
		"\n.type " sym ", %function\n" sym ":\n\thint #34\n\t" body      \
		"\n.size " sym ", . - " sym "\n.popsection");
#define CAPTURE(name, argreg)           \
	FUNC("c_" #name,                \
	     "sub sp, sp, #64\n\t"      \
	     "add x9, sp, #64\n\t"      \
	     "str x9, [sp]\n\t"         \
	     "stp x29, x30, [sp, #8]\n\t" \
	     "stp x19, x20, [sp, #24]\n\t" \
	     "stp x21, x22, [sp, #40]\n\t" \
	     "mov " argreg ", sp\n\t"   \
	     "bl s_" #name "\n\t"       \
	     "ldr x30, [sp, #16]\n\t"   \
	     "add sp, sp, #64\n\t"      \
	     "ret")
CAPTURE(malloc, "x1")
CAPTURE(calloc, "x2")
CAPTURE(realloc, "x2")
CAPTURE(reallocarray, "x3")
CAPTURE(posix_memalign, "x3")
CAPTURE(aligned_alloc, "x2")
CAPTURE(memalign, "x2")
CAPTURE(valloc, "x1")
CAPTURE(pvalloc, "x1")
CAPTURE(free, "x1")

/* The hooks. Scratch registers: x9..x12, x15 and x16 (caller-saved, and
 * x16 the PLT's own); arguments stay in x0..x7. */

/* CHARGE(reg): this thread's counter -= reg, flags set from the result:
 * negative (mi) when a sample is due. */
#define CHARGE(reg)                               \
	"mrs x9, tpidr_el0\n\t"                   \
	"lsr x10, x9, #12\n\t"                    \
	"add x10, x10, x9, lsr #21\n\t"           \
	"and x10, x10, #4095\n\t"                 \
	"adrp x11, counters\n\t"                  \
	"add x11, x11, :lo12:counters\n\t"        \
	"add x11, x11, x10, lsl #3\n\t"           \
	"ldr x12, [x11]\n\t"                      \
	"subs x12, x12, " reg "\n\t"              \
	"str x12, [x11]\n\t"

/* SAMPLED(reg, stub): branch to stub when reg is a sampled block. */
#define SAMPLED(reg, stub)                        \
	"lsr x9, " reg ", #4\n\t"                 \
	"and x9, x9, #32767\n\t"                  \
	"adrp x10, filter\n\t"                    \
	"add x10, x10, :lo12:filter\n\t"          \
	"ldrb w10, [x10, x9]\n\t"                 \
	"cbz w10, 1f\n\t"                         \
	"movz x9, #0x7c15\n\t"                    \
	"movk x9, #0x7f4a, lsl #16\n\t"           \
	"movk x9, #0x79b9, lsl #32\n\t"           \
	"movk x9, #0x9e37, lsl #48\n\t"           \
	"mul x9, " reg ", x9\n\t"                 \
	"lsr x9, x9, #50\n\t"                     \
	"adrp x10, sampled\n\t"                   \
	"add x10, x10, :lo12:sampled\n\t"         \
	"add x10, x10, x9, lsl #5\n\t"            \
	"ldp x11, x12, [x10]\n\t"                 \
	"cmp x11, " reg "\n\tb.eq " stub "\n\t"   \
	"cmp x12, " reg "\n\tb.eq " stub "\n\t"   \
	"ldp x11, x12, [x10, #16]\n\t"            \
	"cmp x11, " reg "\n\tb.eq " stub "\n\t"   \
	"cmp x12, " reg "\n\tb.eq " stub "\n\t"

/* REAL(name): on to glibc's function, through its slot. */
#define JREAL(name)                               \
	"adrp x16, r_" #name "\n\t"               \
	"ldr x16, [x16, :lo12:r_" #name "]\n\t"   \
	"br x16"

#define HOOK(name, body) FUNC("h_" #name, body)

HOOK(malloc, CHARGE("x0") "b.mi c_malloc\n\t" JREAL(malloc))
HOOK(valloc, CHARGE("x0") "b.mi c_valloc\n\t" JREAL(valloc))
HOOK(pvalloc, CHARGE("x0") "b.mi c_pvalloc\n\t" JREAL(pvalloc))
HOOK(aligned_alloc, CHARGE("x1") "b.mi c_aligned_alloc\n\t" JREAL(aligned_alloc))
HOOK(memalign, CHARGE("x1") "b.mi c_memalign\n\t" JREAL(memalign))
HOOK(posix_memalign, CHARGE("x2") "b.mi c_posix_memalign\n\t" JREAL(posix_memalign))
HOOK(calloc, "mul x15, x0, x1\n\t" CHARGE("x15") "b.mi c_calloc\n\t" JREAL(calloc))
HOOK(realloc, CHARGE("x1") "b.mi c_realloc\n\tcbz x0, 1f\n\t" SAMPLED("x0", "c_realloc") "1:\n\t" JREAL(realloc))
HOOK(reallocarray, "mul x15, x1, x2\n\t" CHARGE("x15") "b.mi c_reallocarray\n\tcbz x0, 1f\n\t" SAMPLED("x0", "c_reallocarray") "1:\n\t" JREAL(reallocarray))
HOOK(free, "cbz x0, 1f\n\t" SAMPLED("x0", "c_free") "1:\n\t" JREAL(free))

#else
/* The capture stubs: reached by a jump from a hook, so rsp still points at
 * the caller's return address. They push the caller's callee-saved
 * registers and rsp, and call the slow path with a pointer to them as the
 * argument after the function's own. */
#define CAPTURE(name, argreg)                                                           \
	__attribute__((naked, used, visibility("hidden"))) void c_##name(void) {          \
		__asm__ volatile("push %r15\n\tpush %r14\n\tpush %r13\n\tpush %r12\n\t"    \
				 "push %rbp\n\tpush %rbx\n\tlea 48(%rsp), %rax\n\tpush %rax\n\t" \
				 "mov %rsp, " argreg "\n\t"                                      \
				 "call s_" #name "\n\t"                                          \
				 "add $8, %rsp\n\tpop %rbx\n\tpop %rbp\n\tpop %r12\n\t"          \
				 "pop %r13\n\tpop %r14\n\tpop %r15\n\tret");                     \
	}
CAPTURE(malloc, "%rsi")
CAPTURE(calloc, "%rdx")
CAPTURE(realloc, "%rdx")
CAPTURE(reallocarray, "%rcx")
CAPTURE(posix_memalign, "%rcx")
CAPTURE(aligned_alloc, "%rdx")
CAPTURE(memalign, "%rdx")
CAPTURE(valloc, "%rsi")
CAPTURE(pvalloc, "%rsi")
CAPTURE(free, "%rsi")

/* The hooks, in assembly so that nothing touches the stack on the way to
 * the capture stub or the real function. Scratch registers: rax, r10,
 * r11 (free at a call of a non-variadic function). */

/* CHARGE(reg): this thread's counter -= reg; sign flag set when a sample
 * is due. */
#define CHARGE(reg)                              \
	"mov %fs:0, %r10\n\t"                    \
	"mov %r10, %r11\n\t"                     \
	"shr $12, %r10\n\t"                      \
	"shr $21, %r11\n\t"                      \
	"add %r11, %r10\n\t"                     \
	"and $4095, %r10d\n\t"                   \
	"lea counters(%rip), %r11\n\t"           \
	"sub " reg ", (%r11,%r10,8)\n\t"

/* SAMPLED(reg, stub): jump to stub when reg is a sampled block: first
 * the filter's byte (the usual answer, no), then the block's set. */
#define SAMPLED(reg, stub)                       \
	"mov " reg ", %r10\n\t"                  \
	"shr $4, %r10\n\t"                       \
	"and $32767, %r10d\n\t"                  \
	"lea filter(%rip), %r11\n\t"             \
	"cmpb $0, (%r11,%r10)\n\t"               \
	"je 1f\n\t"                              \
	"mov " reg ", %r10\n\t"                  \
	"movabs $0x9e3779b97f4a7c15, %r11\n\t"   \
	"imul %r11, %r10\n\t"                    \
	"shr $50, %r10\n\t"                      \
	"shl $5, %r10\n\t"                       \
	"lea sampled(%rip), %r11\n\t"            \
	"add %r11, %r10\n\t"                     \
	"cmp (%r10), " reg "\n\tje " stub "\n\t"   \
	"cmp 8(%r10), " reg "\n\tje " stub "\n\t"  \
	"cmp 16(%r10), " reg "\n\tje " stub "\n\t" \
	"cmp 24(%r10), " reg "\n\tje " stub "\n\t"

#define HOOK(name, body) \
	__attribute__((naked, used, visibility("hidden"))) void h_##name(void) { __asm__ volatile(body); }

HOOK(malloc, CHARGE("%rdi") "js c_malloc\n\tjmp *r_malloc(%rip)")
HOOK(valloc, CHARGE("%rdi") "js c_valloc\n\tjmp *r_valloc(%rip)")
HOOK(pvalloc, CHARGE("%rdi") "js c_pvalloc\n\tjmp *r_pvalloc(%rip)")
HOOK(aligned_alloc, CHARGE("%rsi") "js c_aligned_alloc\n\tjmp *r_aligned_alloc(%rip)")
HOOK(memalign, CHARGE("%rsi") "js c_memalign\n\tjmp *r_memalign(%rip)")
HOOK(posix_memalign, CHARGE("%rdx") "js c_posix_memalign\n\tjmp *r_posix_memalign(%rip)")
HOOK(calloc, "mov %rdi, %rax\n\timul %rsi, %rax\n\t" CHARGE("%rax") "js c_calloc\n\tjmp *r_calloc(%rip)")
HOOK(realloc, CHARGE("%rsi") "js c_realloc\n\ttest %rdi, %rdi\n\tjz 1f\n\t" SAMPLED("%rdi", "c_realloc") "1: jmp *r_realloc(%rip)")
HOOK(reallocarray, "mov %rsi, %rax\n\timul %rdx, %rax\n\t" CHARGE("%rax") "js c_reallocarray\n\ttest %rdi, %rdi\n\tjz 1f\n\t" SAMPLED("%rdi", "c_reallocarray") "1: jmp *r_reallocarray(%rip)")
HOOK(free, "test %rdi, %rdi\n\tjz 1f\n\t" SAMPLED("%rdi", "c_free") "1: jmp *r_free(%rip)")

#endif

/* internal/sampler reads these layouts at these offsets. */
_Static_assert(__builtin_offsetof(struct record, kind) == 8, "record.kind");
_Static_assert(__builtin_offsetof(struct record, addr) == 16, "record.addr");
_Static_assert(__builtin_offsetof(struct record, pc) == 40, "record.pc");
_Static_assert(__builtin_offsetof(struct record, stack_len) == 104, "record.stack_len");
_Static_assert(__builtin_offsetof(struct record, old_addr) == 112, "record.old_addr");
_Static_assert(__builtin_offsetof(struct record, stack) == 136, "record.stack");
_Static_assert(sizeof(struct record) == 136 + STACK_COPY, "record size");
_Static_assert(__builtin_offsetof(struct config, enabled) == 16, "cfg.enabled");
_Static_assert(__builtin_offsetof(struct config, ring) == 32, "cfg.ring");
_Static_assert(__builtin_offsetof(struct config, head) == 40, "cfg.head");
_Static_assert(__builtin_offsetof(struct config, tail) == 48, "cfg.tail");
_Static_assert(__builtin_offsetof(struct config, dropped) == 56, "cfg.dropped");
_Static_assert(__builtin_offsetof(struct config, inflight) == 64, "cfg.inflight");
_Static_assert(__builtin_offsetof(struct config, untracked) == 80, "cfg.untracked");
_Static_assert(__builtin_offsetof(struct config, draws) == 88, "cfg.draws");
_Static_assert(__builtin_offsetof(struct config, creator_pid) == 88 + 8 * NDRAWS, "cfg.creator_pid");
_Static_assert(__builtin_offsetof(struct config, patches) == 88 + 8 * NDRAWS + 32, "cfg.patches");
_Static_assert(MAXPATCHES == 2048, "cfg.patches size");
_Static_assert(__builtin_offsetof(struct record, stamp) == 120, "record.stamp");
_Static_assert(__builtin_offsetof(struct config, clock) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES, "cfg.clock");
_Static_assert(__builtin_offsetof(struct config, frees) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES + 8, "cfg.frees");
_Static_assert(__builtin_offsetof(struct config, fhead) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES + 16, "cfg.fhead");
_Static_assert(__builtin_offsetof(struct config, ftail) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES + 24, "cfg.ftail");
_Static_assert(__builtin_offsetof(struct config, fdropped) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES + 32, "cfg.fdropped");
_Static_assert(__builtin_offsetof(struct config, shortened) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES + 40, "cfg.shortened");
_Static_assert(__builtin_offsetof(struct config, shorts) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES + 48, "cfg.shorts");
_Static_assert(__builtin_offsetof(struct config, shead) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES + 64, "cfg.shead");
_Static_assert(SHORT_SIZE == 512, "short record size");
_Static_assert(__builtin_offsetof(struct config, shift) == 88 + 8 * NDRAWS + 32 + 24 * MAXPATCHES + 80, "cfg.shift");
_Static_assert(__builtin_offsetof(struct record, old_size) == 128, "record.old_size");
_Static_assert(sizeof(struct freerec) == 32 && FREE_SLOTS == 1 << 17, "freerec");
_Static_assert(FILTER_BITS == 15 && NDRAWS == 4096 && NCOUNTERS == 4096 && NSETS * WAYS * 8 == 512 * 1024, "sizes");
