package inspect

import (
	"reflect"
	"testing"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/live"
)

// A core (or snapshot) is a debuggee.Target and has none of a live
// process's powers, so no use case that needs one can be handed a core;
// a live process has them all.
func TestCoreHasNoLivePowers(t *testing.T) {
	powers := map[string]reflect.Type{
		"Observed": reflect.TypeFor[live.Observed](),
		"Freezer":  reflect.TypeFor[live.Freezer](),
		"Imager":   reflect.TypeFor[live.Imager](),
		"Borrower": reflect.TypeFor[live.Borrower](),
	}
	ct, lt := reflect.TypeFor[*core.Target](), reflect.TypeFor[*live.Target]()
	if !ct.Implements(reflect.TypeFor[debuggee.Target]()) {
		t.Fatal("a core is not a debuggee.Target")
	}
	for name, p := range powers {
		if ct.Implements(p) {
			t.Errorf("a core has the live power %s", name)
		}
		if !lt.Implements(p) {
			t.Errorf("a live process lacks %s", name)
		}
	}
}
