package budget

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// A profiling session (leaks' window, a recording) holds, for its whole
// length, what it loaded before it began: every object's symbols and
// unwind tables, tens of MiB for a database server. A soft limit set for a
// walk's transient memory then sits at or below the live heap, and the
// garbage collector ran back to back: on mariadbd, with 57 MB live and a
// 57 MB goal, arenactl spent about a fifth of a CPU marking the same
// tables every 50-100 ms while the process allocated almost nothing
// (the server answered 11 % fewer queries). Hold makes the limit follow
// the live heap from then on: what the session must keep, plus the share
// Apply gave the garbage collector for what it makes and drops.
var session struct {
	sync.Mutex
	held  bool
	share uint64 // Apply's share for the Go heap
}

// Hold keeps the garbage collector's soft limit at the live heap plus the
// share of the last Apply, measured again after every collection, for the
// rest of the process's life. Commands that walk or scan once never call
// it: their limit stays the fixed share, which bounds their peak.
func Hold() {
	session.Lock()
	was := session.held
	session.held = true
	session.Unlock()
	retune()
	if !was {
		armRetune()
	}
}

// setShare is Apply's share; with a session held the limit follows it at
// once.
func setShare(share uint64) {
	session.Lock()
	session.share = share
	held := session.held
	session.Unlock()
	if held {
		retune()
	} else {
		debug.SetMemoryLimit(int64(share))
	}
}

// retune sets the soft limit to the live heap (as the last collection
// marked it) plus the share.
func retune() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var live uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = s[0].Value.Uint64()
	}
	session.Lock()
	share := session.share
	session.Unlock()
	if share == 0 {
		share = Base
	}
	debug.SetMemoryLimit(int64(live + share))
}

// gcTick is an object made only to be collected: its finalizer runs after
// each collection that found it unreachable, retunes the limit and makes
// the next one.
type gcTick struct{ _ [16]byte }

func armRetune() {
	runtime.SetFinalizer(new(gcTick), func(*gcTick) {
		session.Lock()
		held := session.held
		session.Unlock()
		if held {
			retune()
			armRetune()
		}
	})
}
