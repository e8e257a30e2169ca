package stackprof_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
)

// TestLeaksJSON: the leaks document of a real profile follows its
// published schema, with and without a measured growth, and says what the
// profile says.
func TestLeaksJSON(t *testing.T) {
	p := realProfile(t)
	x := p.Explains(3 << 20)
	for _, explains := range []*stackprof.Explanation{&x, nil} {
		doc := schema.NewLeaks(1234, p, explains)
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		testutil.ValidateJSON(t, "leaks", b)
		var back schema.Leaks
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Pid != 1234 || back.Rate != fixtureRate || back.Samples != 5 || back.DurationUs != 10e6 ||
			back.Start != "2026-11-23T21:00:00Z" || len(back.Sites) != 2 {
			t.Errorf("document: %s", b)
		}
		if (explains == nil) != (back.Explains == nil) ||
			explains != nil && (back.Explains.MeasuredBytes != 3<<20 || back.Explains.ExplainedBytes != back.InuseSpace) {
			t.Errorf("explains: %+v", back.Explains)
		}
		s := back.Sites[0]
		if s.AllocatedAt.Function != "reserve" || filepath.Base(s.AllocatedAt.File) != "sites.cpp" || !s.AllocatedAt.Inlined ||
			s.StackEnd != "end" || len(s.Kinds) != 1 || s.Kinds[0] != "realloc" || s.Sampled.Inuse != 2 {
			t.Errorf("first site: %+v", s)
		}
		var names []string
		for _, f := range back.Sites[1].Frames {
			names = append(names, f.Function)
		}
		if got := strings.Join(names, ";"); !strings.HasSuffix(got, ";widget_main;server::handle;cache<int>::fill;make_widget;operator new") {
			t.Errorf("second site's frames: %s", got)
		}
		if f := back.Sites[1].Frames[len(back.Sites[1].Frames)-1]; f.Symbol != "_Znwm" || f.BuildID == "" || f.Module == "" {
			t.Errorf("operator new's frame: %+v", f)
		}
		var sum uint64
		for _, s := range back.Sites {
			sum += s.InuseSpace
		}
		if d := int64(sum) - int64(back.InuseSpace); d < -2 || d > 2 {
			t.Errorf("sites hold %d bytes, the total says %d", sum, back.InuseSpace)
		}
	}
}
