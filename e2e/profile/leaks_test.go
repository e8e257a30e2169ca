package profile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
	"github.com/google/pprof/profile"
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
		Patched     int    `json:"patched_got_entries"`
		Interrupted bool   `json:"interrupted"`
		Untracked   uint64 `json:"untracked"`
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
	for _, site := range []string{"app::leak_new", "app::leak_malloc", "app::leak_calloc", "app::grow_realloc", "app::leak_memalign"} {
		truth := after[site] - before[site]
		got := held[site] // samples dropped with both rings full are stood for already
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
		t.Errorf("the churn site, which frees everything, holds %.0f bytes (%d samples, %d dropped, %d untracked)", c, doc.Samples, doc.Dropped, doc.Sampler.Untracked)
	} else if c > 0 {
		t.Logf("the churn site holds %.0f bytes (%d samples, %d dropped, %d untracked)", c, doc.Samples, doc.Dropped, doc.Sampler.Untracked)
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

// -o, --folded and --http from one command line each, on a process whose
// leak_malloc site leaks: the pprof file parses and names it, the folded
// stacks carry it root first, and headless Chromium finds it on the flame
// graph --http serves.
func TestLeaksOutputs(t *testing.T) {
	bin := testutil.BuildCWith(t, "g++", "leaks.cpp", "-O2", "-fomit-frame-pointer")
	tg := testutil.Start(t, bin)
	if a := tg.Send("run"); a != "running" {
		t.Fatalf("run: %q", a)
	}
	pid := fmt.Sprint(tg.Pid)
	file := filepath.Join(t.TempDir(), "heap.pb.gz")
	folded := mustRun(t, "leaks", "--duration", "2s", "--rate", "256K", "-o", file, "--folded", pid).Stdout
	p := parsePprof(t, file)
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if strings.Join(types, " ") != "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes" {
		t.Errorf("sample types %v", types)
	}
	found := false
	for _, fn := range p.Function {
		found = found || fn.Name == "app::leak_malloc"
	}
	if !found {
		t.Errorf("the pprof profile has no app::leak_malloc")
	}
	line := regexp.MustCompile(`(?m)^[^ ]*app::serve;app::handle_connection;app::parse_request;app::leak_malloc;malloc [0-9]+$`)
	if !line.MatchString(folded) {
		t.Errorf("no folded stack for leak_malloc:\n%s", folded)
	}

	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed")
	}
	cmd := exec.Command(arenactl, "leaks", "--duration", "1s", "--rate", "256K", "--http", "127.0.0.1:0", pid)
	cmd.Stdout = io.Discard
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	url := ""
	lines := bufio.NewScanner(stderr)
	for url == "" && lines.Scan() {
		if _, u, ok := strings.Cut(lines.Text(), "serving the profile at "); ok {
			url, _, _ = strings.Cut(u, " ")
		}
	}
	if url == "" {
		t.Fatal("arenactl leaks --http never said where it serves")
	}
	// The rest of arenactl's stderr, for the failure below: its last line
	// says why it exited as it did.
	var rest bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&rest, stderr); close(copied) }()
	out, err := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--window-size=1600,1000", "--virtual-time-budget=10000", "--dump-dom", url).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if !regexp.MustCompile(`class="boxtext"[^>]*>app::leak_malloc<`).Match(out) {
		t.Errorf("app::leak_malloc is not on the flame graph Chromium rendered")
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-copied: // stderr closes as it exits
	case <-time.After(30 * time.Second):
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("arenactl leaks --http after SIGINT: %v\n%s", err, rest.String())
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// SIGKILL of arenactl while it profiles: the hooks stay in, the target
// runs on checking its heap (its samples fill a ring nobody drains), and
// the next leaks run puts the GOT back and says so; a core is refused.
func TestLeaksSIGKILL(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
	cmd := exec.Command(arenactl, "leaks", "--duration", "0", "--rate", "64K", fmt.Sprint(tg.Pid))
	cmd.Stdout = io.Discard
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "the window is open") {
	}
	cmd.Process.Kill()
	cmd.Wait()
	for i := 0; i < 3; i++ {
		time.Sleep(300 * time.Millisecond)
		if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
			t.Fatalf("target after arenactl was killed: %q", a)
		}
	}
	r := mustRun(t, "leaks", "--duration", "500ms", "--json", fmt.Sprint(tg.Pid))
	if !strings.Contains(r.Stderr, "left at") || !strings.Contains(r.Stderr, "GOT entries restored") {
		t.Errorf("the next run did not say it removed the killed one's sampler: %s", r.Stderr)
	}
	if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
		t.Fatalf("target: %q", a)
	}
	if r := run(t, "leaks", filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-2.36-snapshot.core.zst")); r.Code != exitUsage || !strings.Contains(r.Stderr, "no history") {
		t.Errorf("leaks CORE: exit %d, %q", r.Code, r.Stderr)
	}
}

// A process another arenactl is profiling is refused (exit 5, named), and
// the first one's window goes on.
func TestLeaksRefusesSecondProfiler(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
	first := ""
	out := profileWindow(t, tg.Pid, func() {
		r := run(t, "leaks", "--duration", "1s", fmt.Sprint(tg.Pid))
		first = r.Stderr
		expectRefusal(t, r, exitTraced, "being profiled by another arenactl")
	}, "--json")
	if !strings.Contains(out, `"patched_got_entries"`) {
		t.Errorf("the first profiler's output: %s", out)
	}
	if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
		t.Fatalf("target: %q (second run said %s)", a, first)
	}
}

// parsePprof reads a pprof file arenactl wrote.
func parsePprof(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
