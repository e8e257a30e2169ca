package stackprof

import "time"

// RecentReads keeps the last read of each of the last few threads'
// stacks: a burst of samples in one call (a buffer zeroed, 56 fault
// samples on MariaDB; a loop of allocations) is under the same frames,
// and a read of one serves the others taken soon after it. Read once each,
// such a burst spent the reads' rate on one thread and was left cut.
//
// A read kept from before the time Since names serves no sample: a thread
// read on one path, then sampled on another at the same depth, matches the
// read where the two paths' frames differ only above the copy, and was
// completed with the first path's outer frames. With leaks' drains every
// 5 ms a read kept from the drain before served the next one's samples: on
// deep_two_paths.c 319 of 27,149 samples were given the other path's
// frames (TestDeepStacksNeverJoinedWrong). leaks and growth say Since at
// each drain; growth's early reader, which reads a fault sample's stack as
// the sample leaves the ring, says it for each sample, from its time.
type RecentReads struct {
	m     map[uint64]stackRead
	since time.Time
}

// Since says that the samples to come were all taken before t: reads kept
// from before it serve none of them.
func (r *RecentReads) Since(t time.Time) { r.since = t }

// stackRead is one read of a thread's stack, from addr.
type stackRead struct {
	addr uint64
	data []byte
	at   time.Time
}

const (
	recentReuse   = 20 * time.Millisecond // how long a read serves
	recentThreads = 16                    // threads whose last read is kept
)

// Covering returns, from addr on, the read kept for key (a thread or its
// stack's end) when it was taken within recentReuse of now and holds
// [addr, end).
func (r *RecentReads) Covering(key, addr, end uint64, now time.Time) ([]byte, bool) {
	x, ok := r.m[key]
	if !ok || now.Sub(x.at) >= recentReuse || x.at.Before(r.since) || addr < x.addr || x.addr+uint64(len(x.data)) < end {
		return nil, false
	}
	return x.data[addr-x.addr:], true
}

// Keep remembers data, read from addr at now, as key's last read,
// forgetting the oldest past recentThreads keys.
func (r *RecentReads) Keep(key, addr uint64, data []byte, now time.Time) {
	if r.m == nil {
		r.m = map[uint64]stackRead{}
	}
	if _, ok := r.m[key]; !ok && len(r.m) >= recentThreads {
		var old uint64
		first := true
		for k, x := range r.m {
			if first || x.at.Before(r.m[old].at) {
				old, first = k, false
			}
		}
		delete(r.m, old)
	}
	r.m[key] = stackRead{addr: addr, data: data, at: now}
}
