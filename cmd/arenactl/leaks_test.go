package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// leaksDoc is what the tests read of leaks --json.
type leaksDoc struct {
	Rate    uint64 `json:"rate"`
	Samples int    `json:"samples"`
	Dropped uint64 `json:"dropped"`
	Sites   []struct {
		InuseSpace  uint64   `json:"inuse_space"`
		AllocSpace  uint64   `json:"alloc_space"`
		Kinds       []string `json:"kinds"`
		AllocatedAt struct {
			Function string `json:"function"`
			File     string `json:"file"`
			Line     int    `json:"line"`
		} `json:"allocated_at"`
		Frames []struct {
			Function string `json:"function"`
		} `json:"frames"`
	} `json:"sites"`
	Sampler struct {
		Patched     int  `json:"patched_got_entries"`
		Interrupted bool `json:"interrupted"`
		Kept        *struct {
			Why string `json:"why"`
		} `json:"kept"`
	} `json:"sampler"`
}

// profileWindow runs arenactl leaks with args until it says the window is
// open, runs during, then interrupts it (SIGINT ends the window) and
// returns its stdout.
func profileWindow(t *testing.T, pid int, during func(), args ...string) string {
	t.Helper()
	cmd := exec.Command(arenactl, append(append([]string{"leaks", "--duration", "0"}, args...), fmt.Sprint(pid))...)
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	lines := bufio.NewScanner(stderr)
	open := false
	for !open && lines.Scan() {
		said.WriteString(lines.Text() + "\n")
		open = strings.Contains(lines.Text(), "the window is open")
	}
	if !open {
		cmd.Wait()
		t.Fatalf("arenactl leaks never opened its window: %s", said.String())
	}
	go io.Copy(&said, stderr)
	during()
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("arenactl leaks: %v\n%s", err, said.String())
	}
	if strings.Contains(said.String(), "panic") {
		t.Fatalf("arenactl panicked: %s", said.String())
	}
	return out.String()
}

func siteCounts(t *testing.T, tg *testutil.Target) map[string]float64 {
	t.Helper()
	f := strings.Fields(tg.Send("counts"))
	if len(f) == 0 || f[0] != "counts" {
		t.Fatalf("counts: %q", f)
	}
	out := map[string]float64{}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		n, _ := strconv.ParseFloat(v, 64)
		out["app::"+k] = n
	}
	return out
}

// A C++ program built -O2 -fomit-frame-pointer leaks from five sites
// (new of a polymorphic class, malloc, calloc, realloc growth,
// posix_memalign) behind a call chain, and churns through a sixth that
// frees everything; it counts its own outstanding bytes per site. The
// profile's estimate of every leaking site is within sampling error of
// that count (and so are their ratios), the churn holds nothing, the chain
// is unwound in order and named demangled, with file:line.
func TestLeaksSitesWithinSamplingError(t *testing.T) {
	bin := testutil.BuildCWith(t, "g++", "leaks.cpp", "-O2", "-fomit-frame-pointer")
	tg := testutil.Start(t, bin)
	const rate = 128 << 10
	before := map[string]float64{}
	var after map[string]float64
	out := profileWindow(t, tg.Pid, func() {
		before = siteCounts(t, tg)
		if a := tg.Send("run"); a != "running" {
			t.Fatalf("run: %q", a)
		}
		time.Sleep(4 * time.Second)
		if a := tg.Send("pause"); a != "paused" {
			t.Fatalf("pause: %q", a)
		}
		after = siteCounts(t, tg)
	}, "--rate", "128K", "--json")
	testutil.ValidateJSON(t, "leaks", []byte(out))
	var doc leaksDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Rate != rate || !doc.Sampler.Interrupted || doc.Sampler.Patched == 0 || doc.Sampler.Kept != nil {
		t.Errorf("rate %d, interrupted %v, patched %d, kept %+v", doc.Rate, doc.Sampler.Interrupted, doc.Sampler.Patched, doc.Sampler.Kept)
	}
	if doc.Dropped > 0 {
		t.Logf("%d samples dropped of %d", doc.Dropped, doc.Samples)
	}
	held := map[string]float64{}
	for _, s := range doc.Sites {
		held[s.AllocatedAt.Function] += float64(s.InuseSpace)
	}
	scale := 1 + float64(doc.Dropped)/float64(doc.Samples) // drops are spread over the sites
	for _, site := range []string{"app::leak_new", "app::leak_malloc", "app::leak_calloc", "app::grow_realloc", "app::leak_memalign"} {
		truth := after[site] - before[site]
		got := held[site] * scale
		// The estimate's standard deviation is about sqrt(rate × bytes)
		// for blocks much smaller than the rate; realloc's growing
		// blocks are up to 256 KiB, so its allowance is wider.
		tol := 4*math.Sqrt(rate*truth) + 0.05*truth
		if site == "app::grow_realloc" {
			tol = 6*math.Sqrt(rate*truth) + 0.1*truth
		}
		if math.Abs(got-truth) > tol {
			t.Errorf("%s: estimated %.0f bytes held, the program counts %.0f (allowed ±%.0f)", site, got, truth, tol)
		} else {
			t.Logf("%s: estimated %.0f bytes held, the program counts %.0f (±%.0f)", site, got, truth, tol)
		}
	}
	if c := held["app::churn"]; c > 0.02*held["app::leak_malloc"] {
		t.Errorf("the churn site, which frees everything, holds %.0f bytes", c)
	}
	for _, s := range doc.Sites {
		var chain []string
		for _, f := range s.Frames {
			chain = append(chain, f.Function)
		}
		all := strings.Join(chain, " > ")
		switch s.AllocatedAt.Function {
		case "app::leak_malloc":
			if !strings.Contains(all, "app::serve > app::handle_connection > app::parse_request > app::leak_malloc > malloc") {
				t.Errorf("leak_malloc's chain: %s", all)
			}
			if !strings.HasSuffix(s.AllocatedAt.File, "leaks.cpp") || s.AllocatedAt.Line == 0 {
				t.Errorf("leak_malloc at %s:%d", s.AllocatedAt.File, s.AllocatedAt.Line)
			}
		case "app::leak_new":
			if !strings.Contains(all, "app::parse_request > app::leak_new > operator new") {
				t.Errorf("leak_new's chain: %s", all)
			}
		}
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}
