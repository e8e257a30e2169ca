package inject

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc/libc"
)

// What an injection creates in the target (a buffer mapping, a FILE) is
// recorded, before each step, in the journal of the call site its calls
// return through (see internal/ptrace). If arenactl dies, or must abandon a
// call, the site stays in the target with that record, and the next run
// finds it, judges whether it is safe to touch, and removes it all.

// Journaler is implemented by a Caller whose calls run through a marked
// call site: Journal gives the address of the 512 bytes the injection may
// use there (0 before the first call) and the sequence number of the last
// call started.
type Journaler interface {
	Journal() (addr, seq uint64)
}

// LeftoverSite is a call site an earlier run left, that the Caller found
// safe to remove: its creator is gone and no thread runs in it or can
// return into it.
type LeftoverSite struct {
	Addr, Size            uint64
	Creator               int
	Pending, Done, Result uint64 // last call started, last call returned, its value
	Journal               []byte
	JournalAddr           uint64 // where the journal is, to record each removal step in it
}

// LeftoverFinder is implemented by a Caller that can look for leftovers.
// Notes say what was found but kept, and why. RemoveSite unmaps a site
// once what its calls made is gone: the site is not glibc's but the
// memory arenactl placed (internal/implant), removed by a raw syscall.
type LeftoverFinder interface {
	Leftovers() (removable []LeftoverSite, notes []string, err error)
	RemoveSite(s LeftoverSite) error
}

// Noter receives what the user should be told about leftovers.
type Noter interface {
	Note(string)
}

// Journal states: what the injection was doing or holds.
const (
	jNone     = 0
	jMmap     = 1 // mmap of the buffer called
	jMapped   = 2 // buffer mapped
	jFmemopen = 3 // fmemopen called
	jOpen     = 4 // FILE open on the buffer
	jFclose   = 5 // fclose called
	jMunmap   = 6 // munmap of the buffer called
	// A later run removing the leftovers writes these into the old
	// journal before each step, so that a third run never repeats a step
	// that may have been done.
	jClosing   = 7 // a later run called fclose on the FILE
	jUnmapping = 8 // a later run called munmap on the buffer
)

// journal is the injection's record: hold (non-zero while anything exists,
// which keeps the site in place), state, the sequence number of the call
// the state waits on, buffer, size, FILE.
type journal struct{ hold, state, seq, buf, size, fp uint64 }

func decodeJournal(b []byte) journal {
	if len(b) < 48 {
		return journal{}
	}
	le := binary.LittleEndian
	return journal{le.Uint64(b), le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint64(b[24:]), le.Uint64(b[32:]), le.Uint64(b[40:])}
}

// bufMark is written into a buffer's first page (after the fmemopen mode
// string), so that a later run unmaps only a mapping that is still ours.
const (
	bufMark    = "ARENACTL-BUFFER\x00"
	bufMarkOff = 16
)

// record writes the journal before the step it describes. The sequence
// number is that of the next call.
func (in *injection) record(hold, state, buf, size, fp uint64) {
	if in.journal == 0 {
		return
	}
	_, seq := in.c.(Journaler).Journal()
	var b [48]byte
	le := binary.LittleEndian
	for i, v := range []uint64{hold, state, seq + 1, buf, size, fp} {
		le.PutUint64(b[8*i:], v)
	}
	in.c.WriteAt(b[:], in.journal)
}

// leftoverPlan is what can be removed of one leftover site.
type leftoverPlan struct {
	fp, buf, size uint64
	keep          string // why the buffer (and so the site, its record) stays
	unmarked      bool   // the buffer was made by the call that returned last, maybe before it was marked
}

func planLeftover(s LeftoverSite) leftoverPlan {
	j := decodeJournal(s.Journal)
	var p leftoverPlan
	if j.hold == 0 {
		return p
	}
	returned := s.Done == j.seq
	started := s.Pending >= j.seq
	abandoned := started && !returned
	switch j.state {
	case jMmap:
		if returned && s.Result != 0 && s.Result < ^uint64(4095) {
			p.buf, p.size, p.unmarked = s.Result, j.size, true
		} else if abandoned {
			p.keep = "its mmap call never returned"
		}
	case jMapped:
		p.buf, p.size = j.buf, j.size
	case jFmemopen:
		p.buf, p.size = j.buf, j.size
		if returned {
			p.fp = s.Result
		} else if abandoned {
			p.keep = "its fmemopen call was abandoned, so a FILE may point into the buffer"
		}
	case jOpen:
		p.buf, p.size, p.fp = j.buf, j.size, j.fp
	case jFclose:
		p.buf, p.size = j.buf, j.size
		if !started {
			p.fp = j.fp
		} else if abandoned {
			p.keep = "its fclose call was abandoned, so the FILE may still point into the buffer"
		}
	case jMunmap:
		if !started {
			p.buf, p.size = j.buf, j.size
		}
	case jClosing:
		p.buf, p.size = j.buf, j.size
		p.keep = "a later run was closing its FILE when it stopped, so whether the FILE is closed is unknown"
	case jUnmapping:
		p.buf, p.size = j.buf, j.size // unmapped again only if still marked
	}
	return p
}

// removeLeftovers removes what earlier runs' calls made (a FILE, a
// buffer), through calls on this run's thread, then has the finder remove
// each site left empty, and tells the Noter what it did.
func (in *injection) removeLeftovers(l *libc.Libc) {
	f, ok := in.c.(LeftoverFinder)
	if !ok {
		return
	}
	note := func(s string) {
		if n, ok := in.c.(Noter); ok {
			n.Note(s)
		}
	}
	sites, notes, err := f.Leftovers()
	for _, n := range notes {
		note(n)
	}
	if err != nil {
		note("looking for what earlier runs left: " + err.Error())
		return
	}
	fns := map[string]uint64{}
	for _, name := range []string{"fclose", "munmap"} {
		s, ok := l.Lookup(name)
		if !ok {
			return
		}
		fns[name] = s.Value
	}
	for _, s := range sites {
		p := planLeftover(s)
		var done []string
		keep := p.keep
		mark := func(state, fp uint64) {
			hold := uint64(1)
			if state == jNone {
				hold = 0
			}
			var b [48]byte
			for i, v := range []uint64{hold, state, 0, p.buf, p.size, fp} {
				binary.LittleEndian.PutUint64(b[8*i:], v)
			}
			in.c.WriteAt(b[:], s.JournalAddr)
		}
		if p.fp != 0 {
			mark(jClosing, p.fp)
			if _, err := in.c.Call(fns["fclose"], p.fp); err != nil {
				note(fmt.Sprintf("closing the FILE at %#x that arenactl (pid %d) left: %v", p.fp, s.Creator, err))
				return
			}
			done = append(done, fmt.Sprintf("a FILE at %#x", p.fp))
			mark(jMapped, 0)
		}
		if p.buf != 0 && keep == "" {
			var m [len(bufMark)]byte
			if _, err := in.c.ReadAt(m[:], p.buf+bufMarkOff); p.unmarked || err == nil && string(m[:]) == bufMark {
				mark(jUnmapping, 0)
				if rc, err := in.c.Call(fns["munmap"], p.buf, p.size); err != nil {
					note(fmt.Sprintf("unmapping the buffer at %#x that arenactl (pid %d) left: %v", p.buf, s.Creator, err))
					return
				} else if rc == 0 {
					done = append(done, fmt.Sprintf("a %d-byte buffer at %#x", p.size, p.buf))
					mark(jNone, 0)
				}
			}
		}
		if keep != "" {
			note(fmt.Sprintf("kept the %d-byte buffer at %#x and the call site at %#x that arenactl (pid %d) left: %s", p.size, p.buf, s.Addr, s.Creator, keep))
			continue
		}
		if err := f.RemoveSite(s); err != nil {
			// What was removed of it is said, and the next site is tried:
			// a kernel that refused this munmap may take the next one,
			// and a thread that is lost fails the next call at once.
			left := fmt.Sprintf("unmapping the call site at %#x that arenactl (pid %d) left: %v", s.Addr, s.Creator, err)
			if len(done) > 0 {
				left += "; removed " + strings.Join(done, ", ")
			}
			note(left)
			continue
		}
		done = append(done, fmt.Sprintf("its %d-byte call site at %#x", s.Size, s.Addr))
		note(fmt.Sprintf("removed what an earlier arenactl (pid %d) left in the target: %s", s.Creator, strings.Join(done, ", ")))
	}
}
