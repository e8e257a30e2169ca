package stackprof_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/render"
)

// TestRenderLeaks prints the real profile as leaks does: the window, the
// totals, the explanation, then the sites by held bytes with the
// allocating frame's file:line and its callers.
func TestRenderLeaks(t *testing.T) {
	p := realProfile(t)
	x := p.Explains(3 << 20)
	var b strings.Builder
	if err := render.Leaks(&b, p, &x); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"heap profile over 10s, one sample per 512.0 KiB allocated on average: 5 samples\n",
		// 4 held samples: the error is as large as the estimate.
		"explains 2.1 ± 3.0 of 3.0 MiB of the in-use growth: from 4 held samples, too few to tell (--rate 16KiB would take about 100)\n",
		"2 sites still holding memory:\n",
		fmt.Sprintf("reserve  stackprof/sites.cpp:%d\n", sourceLine(t, "// site:buffer")),
		"< grow_buffer < parser::parse < buffer_main < start_thread < ...\n",
		fmt.Sprintf("make_widget  stackprof/sites.cpp:%d\n", sourceLine(t, "// site:widget")),
		"< cache<int>::fill < server::handle < widget_main < start_thread < ...\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q", want)
		}
	}
	// Largest holder first; its row: held, objects, growth, allocated, samples.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "allocated at") {
			if !strings.Contains(lines[i+1], "reserve") || !strings.Contains(lines[i+3], "make_widget") {
				t.Errorf("sites not in order of held bytes")
			}
			if f := strings.Fields(lines[i+1]); len(f) < 10 || f[0]+" "+f[1] != "1.1 MiB" || f[2] != "17" || f[3]+" "+f[4] != "108.9 KiB/s" || f[7] != "2/2" {
				t.Errorf("reserve's row %q", lines[i+1])
			}
		}
	}
}
