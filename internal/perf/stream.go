package perf

import (
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Stream empties a session's rings in a goroutine of its own, as fast as
// the kernel fills them, into a queue the caller takes from at its own
// pace: unwinding a sample costs far more than copying it, and a ring
// that waits for the unwinder fills and loses records.
type Stream struct {
	s        *Session
	maxBytes int
	mu       sync.Mutex
	// queue are the batches read, one per read of the rings, in order:
	// at hundreds of thousands of samples a second, appending them to
	// one slice copied them again and again as it grew, and the reader
	// fell a hundred milliseconds behind the kernel. lent are those
	// Take returned, reused (free) once recycled.
	queue, lent, freeBatches [][]Sample
	// reading: the slabs of the Read under way; queued: those of the
	// samples queued; taken: those of the samples Take returned since
	// the last Recycle; free: the ones to reuse.
	reading, queued, taken, free [][]byte
	slabBytes                    int // made, in all
	batchBytes                   int // of the batches queued or lent
	stop                         chan struct{}
	done                         chan struct{}
	// early, when set, sees each sample on the reader's goroutine, as
	// soon as it is read from its ring (StreamEarly).
	early func(*Sample)
}

// sampleSize is what a sample takes in a batch.
const sampleSize = int(unsafe.Sizeof(Sample{}))

// Stream starts reading s; the queue holds at most maxBytes of samples
// and their data (more are counted in Dropped). Only the stream touches s
// until Stop returns.
func (s *Session) Stream(maxBytes int) *Stream { return s.StreamEarly(maxBytes, nil) }

// StreamEarly is Stream with early called on each sample on the reader's
// goroutine as soon as it is read from its ring, some milliseconds before
// Take hands it out: what the caller must read of the process while it
// is still as the sample found it (the stack above a copy cut short). It
// must be quick, and safe beside the caller.
func (s *Session) StreamEarly(maxBytes int, early func(*Sample)) *Stream {
	st := &Stream{s: s, maxBytes: maxBytes, stop: make(chan struct{}), done: make(chan struct{}), early: early}
	s.newSlab = st.newSlab
	go st.run()
	return st
}

// newSlab hands the session a free slab, or a new one. Called by the
// reader during Read only: each Read starts a slab of its own, so that the
// slabs of a batch of samples hold no other batch's.
func (st *Stream) newSlab(n int) ([]byte, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var b []byte
	for len(st.free) > 0 && b == nil {
		b = st.free[len(st.free)-1][:0]
		st.free = st.free[:len(st.free)-1]
		if cap(b) < n {
			b = nil
		}
	}
	if b == nil {
		// Slabs are made while those in use, and the batches, stay
		// within the bound; past it the samples are let go (the
		// unwinder is behind).
		if st.slabBytes+st.batchBytes+max(slabSize, n) > st.maxBytes {
			return nil, false
		}
		b = make([]byte, 0, max(slabSize, n))
		st.slabBytes += cap(b)
	}
	st.reading = append(st.reading, b)
	return b, true
}

// Recycle says that no sample Take returned so far is used any more:
// their memory is reused for the samples to come.
func (st *Stream) Recycle() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.free = append(st.free, st.taken...)
	st.taken = nil
	for _, b := range st.lent {
		st.batchBytes -= cap(b) * sampleSize
		st.freeBatches = append(st.freeBatches, b[:0])
	}
	st.lent = nil
}

func (st *Stream) run() {
	defer close(st.done)
	// The reader runs on a thread of its own, ahead of the process's
	// threads when it wakes (root may raise its priority; others keep
	// theirs): a process busy on every CPU would otherwise starve it
	// while its rings overflow.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	old, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err == nil && unix.Setpriority(unix.PRIO_PROCESS, tid, -10) == nil {
		// Getpriority returns 20-nice; the thread goes back to the pool
		// as it was.
		defer unix.Setpriority(unix.PRIO_PROCESS, tid, 20-old)
	}
	took := 0 // samples the last read took
	for {
		select {
		case <-st.stop:
			st.s.Disable()
			// The calls' ring a bite at a time, as in the window.
			for st.s.Pending() {
				st.push(st.read(false))
			}
			st.push(st.read(true))
			return
		default:
		}
		if !st.s.Pending() {
			st.s.Wait(waitMs(took))
		}
		smps := st.read(false)
		took = len(smps)
		st.push(smps)
	}
}

// waitMs is how long the reader waits for a ring to fill before it reads
// them all anyway, given the samples the last read took: 2 ms while a few
// come, 10 ms while none or many do. The stream's early function reads a
// sample's thread stack when the sample is read, and a short statement on
// a deep path (MariaDB's DROP DATABASE, a thread's stack growing) is
// often over within 10 ms. Under mariadb-slap, runs whose growth stacks
// reached their thread's first frame 95% of the time or more: at 10 ms, 6
// in 11 (76.7-98.7%); at 2 ms, 21 in 27 (77.1-99.2%); at 2 ms while
// samples come, 5 in 6 (92.7-97.3%), and 13 in 14 with 16 KiB fault
// copies (growth's DefaultFaultStack); as now, 9 in 11 (78.0-99.5%). The
// one straggler looked at was a CREATE TABLE LIKE deeper than any copy.
// Only while samples come: on a process that faults nothing, 2 ms
// throughout cost arenactl 2.7% of a CPU more than 10 ms. Only while few
// come (MariaDB's reads take a few each): on a process touching new pages
// flat out, whose reads take hundreds, 2 ms cost arenactl 4% of a CPU more,
// for stacks its many samples complete anyway (stackprof's complete.go).
func waitMs(took int) int {
	if took > 0 && took < fewSamples {
		return 2
	}
	return 10
}

// fewSamples is the most a read may take for the next to come sooner.
const fewSamples = 256

// read reads the rings into slabs and a batch of their own (all: the
// last read, which holds nothing back).
func (st *Stream) read(all bool) []Sample {
	st.s.slab = nil
	st.mu.Lock()
	var b []Sample
	if n := len(st.freeBatches); n > 0 {
		b, st.freeBatches = st.freeBatches[n-1], st.freeBatches[:n-1]
	}
	st.mu.Unlock()
	smps := st.s.ReadInto(b, all)
	if st.early != nil {
		for i := range smps {
			st.early(&smps[i])
		}
	}
	return smps
}

func (st *Stream) push(smps []Sample) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.queued = append(st.queued, st.reading...)
	st.reading = nil
	if len(smps) == 0 {
		st.freeBatches = append(st.freeBatches, smps)
		return
	}
	st.batchBytes += cap(smps) * sampleSize
	st.queue = append(st.queue, smps)
}

// Take returns the samples queued so far: a batch per read of the rings,
// in the order read, each sorted by time.
func (st *Stream) Take() [][]Sample {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.queue
	st.queue = nil
	st.lent = append(st.lent, q...)
	st.taken = append(st.taken, st.queued...)
	st.queued = nil
	return q
}

// Stop disables the events, reads the rings one last time and ends the
// goroutine; Take then returns what is left.
func (st *Stream) Stop() {
	select {
	case <-st.stop:
	default:
		close(st.stop)
	}
	<-st.done
}

// Dropped is how many samples were read and let go for want of room (the
// bound on the samples not yet recycled). Read once Stop returned.
func (st *Stream) Dropped() uint64 { return st.s.Dropped }
