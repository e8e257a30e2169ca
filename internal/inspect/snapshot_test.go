package inspect

import (
	"reflect"
	"testing"

	"github.com/arenactl/arenactl/internal/maps"
)

func TestRangeSets(t *testing.T) {
	r := func(pairs ...uint64) []maps.Range {
		var rs []maps.Range
		for i := 0; i < len(pairs); i += 2 {
			rs = append(rs, maps.Range{Start: pairs[i], End: pairs[i+1]})
		}
		return rs
	}
	if got := mergeRanges(r(5, 6, 1, 3, 2, 4, 4, 5, 8, 8, 9, 10)); !reflect.DeepEqual(got, r(1, 6, 9, 10)) {
		t.Errorf("merge: %v", got)
	}
	if got := subtract(r(0, 10, 20, 30, 40, 50), r(2, 3, 5, 25, 45, 60)); !reflect.DeepEqual(got, r(0, 2, 3, 5, 25, 30, 40, 45)) {
		t.Errorf("subtract: %v", got)
	}
	set := r(0, 10, 20, 30)
	if !covers(set, 2, 10) || covers(set, 5, 21) || !overlaps(set, 5, 21) || overlaps(set, 10, 20) {
		t.Error("covers/overlaps")
	}
}
