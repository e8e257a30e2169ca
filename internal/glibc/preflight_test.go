package glibc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestPreflightDamage(t *testing.T) {
	const arena, other = 0x7f0000000030, 0x7f0004000030
	abort := Damage{Arena: arena, Addr: 0x7f0000002ba0, What: "unaligned fastbin chunk", Abort: true}
	hang := Damage{Arena: arena, Addr: 0x7f0000001660, What: "bin 17 loops", Hang: true}
	benign := Damage{Arena: arena, Addr: 0x7f0000004000, What: "heap_info.ar_ptr is 0x1, not its arena"}
	inLocked := Damage{Arena: other, Addr: 0x7f0004009000, What: "bin 3 holds a chunk pointer outside writable memory", Abort: true}
	arenas := []ArenaWalk{{Addr: arena}, {Addr: other, Mutex: 1}}

	for _, tc := range []struct {
		name   string
		damage []Damage
		want   *Damage // nil: no refusal
		more   int
	}{
		{"clean", nil, nil, 0},
		{"benign damage only", []Damage{benign}, nil, 0},
		{"abort", []Damage{benign, abort}, &abort, 0},
		{"hang", []Damage{hang}, &hang, 0},
		{"both", []Damage{hang, abort}, &hang, 1},
		// A thread stopped holding an arena's lock may be half-way through
		// changing its lists.
		{"in a locked arena", []Damage{inLocked}, nil, 0},
		{"in a locked arena and elsewhere", []Damage{inLocked, abort}, &abort, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Walk{Arenas: arenas, Damage: tc.damage}
			err := PreflightDamage(w)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var de *HeapDamageError
			if !errors.As(err, &de) {
				t.Fatalf("got %v, want a HeapDamageError", err)
			}
			if de.Damage != *tc.want || de.More != tc.more {
				t.Errorf("refused on %+v (and %d more), want %+v (and %d)", de.Damage, de.More, *tc.want, tc.more)
			}
			word := "makes glibc abort"
			if tc.want.Hang {
				word = "makes glibc loop forever"
			}
			for _, w := range []string{word, "would", fmt.Sprintf("%#x", tc.want.Addr)} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

func TestPreflightLocks(t *testing.T) {
	w := &Walk{Arenas: []ArenaWalk{{Addr: 0x7f00000a0c60, Main: true}, {Addr: 0x7f0000000030}}}
	if err := PreflightLocks(w, []int{12, 11}); err != nil {
		t.Errorf("every lock free, threads stopped: refused: %v", err)
	}
	w.Arenas[1].Mutex = 2
	if err := PreflightLocks(w, nil); err != nil {
		t.Errorf("a lock held, no thread stopped: refused: %v", err)
	}
	err := PreflightLocks(w, []int{12, 11})
	var le *LockedArenaError
	if !errors.As(err, &le) {
		t.Fatalf("a lock held while threads are stopped: got %v", err)
	}
	if le.Index != 1 || le.Arena != 0x7f0000000030 || le.Mutex != 2 || len(le.Stopped) != 2 || le.Stopped[0] != 11 {
		t.Errorf("refusal %+v", le)
	}
	for _, word := range []string{"arena 1 (0x7f0000000030) is locked", "11, 12", "would wait for it"} {
		if !strings.Contains(err.Error(), word) {
			t.Errorf("%q lacks %q", err, word)
		}
	}
}

func TestRefreshLocks(t *testing.T) {
	w := &Walk{Arenas: []ArenaWalk{{Addr: 0x1000, Mutex: 1}, {Addr: 0x2000}}}
	mem := words{0x2000: 2}
	if err := RefreshLocks(mem, w); err != nil {
		t.Fatal(err)
	}
	if w.Arenas[0].Mutex != 0 || w.Arenas[1].Mutex != 2 {
		t.Errorf("mutexes %d, %d; want 0, 2", w.Arenas[0].Mutex, w.Arenas[1].Mutex)
	}
}
