package stackprof_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
)

// valued is a growth-like profile of two sites in two classes.
func valued() *stackprof.Valued {
	return &stackprof.Valued{
		Types:   []stackprof.ValueType{{Type: "touched_space", Unit: "bytes"}, {Type: "calls", Unit: "count"}},
		Default: "touched_space",
		Window:  stackprof.Window{Start: time.Unix(1700000000, 0), Duration: time.Second},
		Sites: []stackprof.ValuedSite{
			{Frames: []stackprof.Frame{{Function: "main", Addr: 0x1000}, {Function: "map_pages", Addr: 0x1100}},
				Labels: map[string]string{"class": "anon"}, Values: []float64{32 << 20, 0}},
			{Frames: []stackprof.Frame{{Function: "main", Addr: 0x1000}, {Function: "grow;heap", Addr: 0x1200}},
				Labels: map[string]string{"class": "arena-heap", "arena": "1"}, Values: []float64{4096, 3}},
		},
	}
}

func TestValuedCodecs(t *testing.T) {
	v := valued()
	var buf bytes.Buffer
	if err := stackprof.WriteValuedPprof(&buf, v); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.SampleType) != 2 || p.DefaultSampleType != "touched_space" || len(p.Sample) != 2 ||
		p.Sample[1].Label["arena"][0] != "1" || p.Sample[0].Value[0] != 32<<20 || len(p.Sample[0].Location) != 2 {
		t.Errorf("pprof: %v", p)
	}
	var f strings.Builder
	if err := stackprof.WriteValuedFolded(&f, v, 0, "class"); err != nil {
		t.Fatal(err)
	}
	want := "main;grow:heap;[arena-heap] 4096\nmain;map_pages;[anon] 33554432\n"
	if f.String() != want {
		t.Errorf("folded:\n%s\nwant:\n%s", f.String(), want)
	}
}

func TestServeValued(t *testing.T) {
	web, err := stackprof.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- web.ServeValued(ctx, valued()) }()
	base := strings.TrimSuffix(web.URL(), "/ui/flamegraph")
	var resp *http.Response
	testutil.WaitUntil(t, "the web view to answer", func() bool {
		resp, err = http.Get(base + "/ui/top")
		return err == nil
	})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "map_pages") {
		t.Errorf("GET top: %s\n%.2000s", resp.Status, body)
	}
	if r, err := http.Get(base + "x/ui/top"); err == nil && r.StatusCode != http.StatusNotFound {
		t.Errorf("a wrong secret path: %s", r.Status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeValued after its context ended: %v", err)
		}
	case <-time.After(testutil.Patience):
		t.Fatal("ServeValued did not return when its context ended")
	}
}
