package render

import "testing"

// The sparkline spans the lowest to the highest value, and squeezes a long
// series into its width.
func TestSparkline(t *testing.T) {
	if got := Sparkline([]uint64{1, 1, 5, 9}, 60); got != "▁▁▄█" {
		t.Errorf("sparkline = %q", got)
	}
	if got := Sparkline([]uint64{3, 3}, 60); got != "▁▁" {
		t.Errorf("flat sparkline = %q", got)
	}
	long := make([]uint64, 1000)
	for i := range long {
		long[i] = uint64(i)
	}
	if got := []rune(Sparkline(long, 60)); len(got) != 60 || got[0] != '▁' || got[59] != '█' {
		t.Errorf("long sparkline = %q", string(got))
	}
}
