package layouts

import "testing"

func TestVersion(t *testing.T) {
	v := Version{2, 36}
	if v.String() != "2.36" {
		t.Errorf("String() = %q", v.String())
	}
	for _, c := range []struct {
		major, minor int
		less         bool
	}{{2, 35, false}, {2, 36, false}, {2, 37, true}, {3, 0, true}, {1, 99, false}} {
		if got := v.Less(c.major, c.minor); got != c.less {
			t.Errorf("%v.Less(%d, %d) = %v", v, c.major, c.minor, got)
		}
		if got := v.AtLeast(c.major, c.minor); got == c.less {
			t.Errorf("%v.AtLeast(%d, %d) = %v", v, c.major, c.minor, got)
		}
	}
}
