package layouts

import "testing"

func TestLayoutsCoverEveryVersion(t *testing.T) {
	for m := 17; m <= 43; m++ {
		l, err := LayoutFor(Version{2, m})
		if err != nil {
			t.Fatalf("2.%d: %v", m, err)
		}
		// The first chunk of a thread arena's first heap (_int_new_arena, malloc/arena.c).
		want := map[bool]int64{true: 0x8d0, false: 0x8c0}[m >= 35]
		switch {
		case m <= 26:
			want = 0x8b0
		case m == 43:
			want = 0x870
		}
		if got := l.FirstChunk(); got != want {
			t.Errorf("2.%d: first chunk at heap+%#x, want %#x", m, got, want)
		}
	}
	for _, v := range []Version{{2, 16}, {2, 44}, {3, 0}} {
		if _, err := LayoutFor(v); err == nil {
			t.Errorf("%s: no error", v)
		}
	}
}
