package stackprof

import (
	"bytes"
	"time"

	"github.com/arenactl/arenactl/internal/unwind"
)

// This file completes a stack cut short by its copy with the thread's
// stack as it is when the sample is unwound, read from the process
// without stopping it, when that stack still holds what the copy held
// where the two meet: the last frame the copy unwound, and the word
// below it (on x86_64 the return address into it), byte for byte. The
// thread is then still in the call the sample was taken under, and
// what lies above that frame (its callers' frames, which a call below
// never writes) is what it was when the sample was taken. A thread that
// has returned from that frame since, or whose frame changed, fails the
// comparison and the stack stays cut: it is left to the exact joining
// (rejoin.go) and the statistical completion.
//
// Learning alone (unwind.Outer) joins a cut stack only to outer frames
// seen before at the same depth; MariaDB's CREATE and DROP TABLE, whose
// frames go deeper than a copy and whose threads are never blocked in a
// call long enough to be read whole (blocked.go), were never seen so: 10%
// of leaks' samples under mariadb-slap and 20% of growth's stayed cut.
// Their statements last long enough that the thread is still in them
// when the sample is read, some milliseconds later (growth reads the
// stack when the stream takes the sample, internal/growth's early.go).
// The comparison cannot tell two paths apart whose frames hold the same
// bytes at the same depths; a real frame holds the objects it works on
// (TestDeepStacksNeverJoinedWrong's frames hold their path).

// Extension bounds: the smallest copy worth completing (a short copy's
// thread has left the call by the time it is read, most often, and short
// copies are many) and the most read above one.
const (
	extendMinCopy = 4 << 10
	extendMax     = 512 << 10
	// extendBelow is how much below the last frame's sp is compared too:
	// the return address into it on x86_64 (the word below its sp), so
	// that a thread that returned and called again from elsewhere in the
	// same frame fails.
	extendBelow = 8
	// extendMatch is the least compared: the frames below the last one
	// are then compared too, which fails (and leaves the stack cut) if
	// the thread has returned from them since.
	extendMatch = 256
	// extendRate bounds the bytes read a second: where most stacks are
	// cut (thousands a second), the rest are left to the joining, and
	// arenactl's time stays bounded.
	extendRate = 16 << 20
)

// SetMemory gives the Builder the process's memory as it is now (a live
// target's ReadAt, which never stops it): cut stacks are completed from
// it where it still matches their copy.
func (b *Builder) SetMemory(read func(p []byte, addr uint64) (int, error)) { b.mem = read }

// SetMemory is the Builder's SetMemory for the stacks of a Stacks.
func (t *Stacks) SetMemory(read func(p []byte, addr uint64) (int, error)) { t.b.SetMemory(read) }

// SampledBefore says that the samples added from now on were all taken
// before t (a drain that began at t): a read of a thread's stack kept from
// before t completes none of them (RecentReads.Since).
func (b *Builder) SampledBefore(t time.Time) { b.extendRecent.Since(t) }

// SampledBefore is the Builder's SampledBefore for the stacks of a Stacks.
func (t *Stacks) SampledBefore(tm time.Time) { t.b.SampledBefore(tm) }

// Extended counts the stacks completed from the memory, of how many
// tried.
func (b *Builder) Extended() (done, tried int) { return b.extended, b.extendTried }

// extend returns the copy completed with the memory above it, when the
// memory still holds the copy's bytes from the last frame of tr (the
// copy's unwinding, cut short) on; ok false if not.
func (b *Builder) extend(stack unwind.Stack, tr *unwind.Trace) (unwind.Stack, bool) {
	if b.mem == nil || !tr.Truncated || len(tr.Frames) == 0 || len(stack.Data) < extendMinCopy || stack.End == 0 {
		return stack, false
	}
	copyEnd := stack.Addr + uint64(len(stack.Data))
	from := tr.Frames[len(tr.Frames)-1].SP
	if from >= copyEnd || stack.End <= copyEnd {
		return stack, false
	}
	// The word below the frame, and at least extendMatch bytes: a
	// frame cut a few bytes above its sp left too little to tell two
	// paths apart (deep_two_paths.c's, which differ in one byte). Not
	// below the copy's start (a leaf whose own frame is deeper than the
	// copy).
	from = max(min(from-extendBelow, copyEnd-extendMatch), stack.Addr)
	to := min(stack.End, stack.Addr+extendMax)
	if to <= copyEnd {
		return stack, false
	}
	n := int(to - from)
	if cap(b.extendBuf) < int(to-stack.Addr) {
		b.extendBuf = make([]byte, to-stack.Addr)
	}
	buf := b.extendBuf[:to-stack.Addr]
	off := int(from - stack.Addr)
	matches := func(got int) bool {
		return got >= int(copyEnd-from)+8 && bytes.Equal(buf[off:int(copyEnd-stack.Addr)], stack.Data[off:])
	}
	now := time.Now()
	// A burst of one thread's samples is read once (RecentReads).
	if data, ok := b.extendRecent.Covering(stack.End, from, copyEnd+1, now); ok {
		got := copy(buf[off:off+n], data)
		if matches(got) {
			b.extendTried++
			copy(buf[:off], stack.Data[:off])
			return unwind.Stack{Addr: stack.Addr, Data: buf[:off+got], End: stack.End}, true
		}
	}
	if now.Sub(b.extendAt) >= time.Second/10 {
		b.extendAt, b.extendBudget = now, extendRate/10
	}
	if n > b.extendBudget {
		return stack, false
	}
	b.extendBudget -= n
	b.extendTried++
	data := make([]byte, n)
	got, _ := b.mem(data, from)
	data = data[:got]
	b.extendRecent.Keep(stack.End, from, data, now)
	copy(buf[off:off+n], data)
	if !matches(got) {
		return stack, false
	}
	copy(buf[:off], stack.Data[:off])
	return unwind.Stack{Addr: stack.Addr, Data: buf[:off+got], End: stack.End}, true
}
