package exporter

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/arenactl/arenactl/internal/testutil"
)

// anonExec is the target's anonymous executable mappings: a C program of
// testdata has none; the sampler's code is one.
func anonExec(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 5 && strings.Contains(f[1], "x") {
			out = append(out, l)
		}
	}
	return out
}

// fetchProfile GETs path and parses it as pprof does; the status is
// returned for the requests that are to be refused.
func (e *exporterProc) fetchProfile(t *testing.T, path string) (*profile.Profile, int, string) {
	t.Helper()
	resp, err := http.Get(e.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, string(b)
	}
	p, err := profile.ParseData(b)
	if err != nil {
		t.Fatalf("GET %s: not a pprof profile: %v", path, err)
	}
	return p, resp.StatusCode, ""
}

// heldBy sums the profile's inuse_space over the samples whose stack names
// fn.
func heldBy(t *testing.T, p *profile.Profile, fn string) int64 {
	t.Helper()
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("the profile has no inuse_space: %v", p.SampleType)
	}
	var sum int64
	for _, s := range p.Sample {
		named := false
		for _, l := range s.Location {
			for _, ln := range l.Line {
				named = named || ln.Function != nil && ln.Function.Name == fn
			}
		}
		if named {
			sum += s.Value[idx]
		}
	}
	return sum
}

// TestExporterProfile: an exporter watching two copies of
// testdata/record_phases.c, told to profile one (--profile-pid), serves
// that one's profile at /debug/pprof/heap?pid=N and
// /pid/N/debug/pprof/allocs: a pprof profile that go tool pprof reads over
// HTTP and whose inuse_space for site_b and site_c (what the program holds
// once its phases are done: 682 blocks of 48 KiB, 16 of 1 MiB) is the
// program's own count within 4.5 standard errors of the sampling (Poisson
// sampling at --profile-rate 64K: a block of s bytes is sampled with
// p = 1-exp(-s/64K), and the estimate's variance is n s² (1-p)/p; a false
// failure about 1 in 10^5 per check). The other copy gets no sampler
// (profiling is opt-in) and its profile is refused, as are names, PIDs and
// paths that are not a profiled process's; when the exporter exits the
// sampler is taken out and the program runs on.
func TestExporterProfile(t *testing.T) {
	bin := testutil.BuildC(t, "record_phases.c", "-O2", "-g")
	dir := t.TempDir()
	start := func(name string) *testutil.Target {
		cmd := exec.Command(bin, filepath.Join(dir, name), "hold")
		cmd.Env = append(os.Environ(), "PLATEAU_MS=200")
		return testutil.StartCmd(t, cmd)
	}
	tg, other := start("truth"), start("truth-other")
	e := startExporter(t, "--pid", fmt.Sprint(tg.Pid), "--pid", fmt.Sprint(other.Pid),
		"--profile-pid", fmt.Sprint(tg.Pid), "--profile-every", "200ms", "--profile-rate", "64K")
	heap := fmt.Sprintf("/debug/pprof/heap?pid=%d", tg.Pid)
	// The first profile is served once the sampler is in place; what the
	// program allocates after that is counted.
	testutil.WaitUntil(t, "the first profile", func() bool {
		_, code, _ := e.fetchProfile(t, heap)
		if code != http.StatusOK {
			time.Sleep(50 * time.Millisecond)
		}
		return code == http.StatusOK
	})
	if a := tg.Send("go"); a != "phases done" {
		t.Fatalf("go: %q", a)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "truth"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 5 {
		t.Fatalf("the truth's last line: %q", lines[len(lines)-1])
	}
	heldB, _ := strconv.ParseInt(f[3], 10, 64)
	heldC, _ := strconv.ParseInt(f[4], 10, 64)
	if heldB != 682*48<<10 || heldC != 16<<20 {
		t.Fatalf("the program says it holds %d and %d bytes at site_b and site_c", heldB, heldC)
	}
	sigma := func(n, size int64) float64 {
		p := 1 - math.Exp(-float64(size)/float64(64<<10))
		return math.Sqrt(float64(n) * float64(size) * float64(size) * (1 - p) / p)
	}
	// Profiles built after the phases ended are the end's: wait for one
	// built from drains after "phases done" (two periods).
	var p *profile.Profile
	testutil.WaitUntil(t, "a profile of the phases' end", func() bool {
		time.Sleep(500 * time.Millisecond)
		var code int
		p, code, _ = e.fetchProfile(t, heap)
		return code == http.StatusOK && heldBy(t, p, "site_c") > 0
	})
	for _, c := range []struct {
		fn          string
		truth       int64
		n, blockLen int64
	}{{"site_b", heldB, 682, 48 << 10}, {"site_c", heldC, 16, 1 << 20}} {
		got, sd := heldBy(t, p, c.fn), sigma(c.n, c.blockLen)
		t.Logf("%s: %d bytes held by the profile, %d by the program's count (σ %.0f)", c.fn, got, c.truth, sd)
		if math.Abs(float64(got-c.truth)) > 4.5*sd {
			t.Errorf("%s: the profile holds %d bytes, the program %d: %.1f standard errors off", c.fn, got, c.truth, float64(got-c.truth)/sd)
		}
	}
	if a := heldBy(t, p, "site_a"); float64(a) > 4.5*sigma(768, 64<<10) {
		t.Errorf("site_a's blocks are freed, the profile holds %d bytes of them", a)
	}

	// go tool pprof reads it over HTTP, as a profile store scrapes it, by
	// either path form.
	out, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space",
		fmt.Sprintf("%s/pid/%d/debug/pprof/allocs", e.url, tg.Pid)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "site_b") {
		t.Errorf("go tool pprof over HTTP: %v\n%s", err, out)
	}

	ms := e.scrape(t)
	if len(ms.find("arenactl_profile_age_seconds", "pid", fmt.Sprint(tg.Pid))) != 1 || len(ms.find("arenactl_profile_age_seconds", "pid", fmt.Sprint(other.Pid))) != 0 {
		t.Errorf("arenactl_profile_age_seconds is not there for the profiled process alone:\n%s", ms.text)
	}

	// Opt-in: the other process is watched, not profiled.
	if m := anonExec(t, other.Pid); len(m) > 0 {
		t.Errorf("a process not chosen by --profile-pid has the sampler: %v", m)
	}
	for _, path := range []string{
		fmt.Sprintf("/debug/pprof/heap?pid=%d", other.Pid),
		fmt.Sprintf("/debug/pprof/heap?pid=%d", os.Getpid()),
		"/debug/pprof/heap", "/debug/pprof/heap?pid=abc", "/debug/pprof/heap?pid=-1",
		"/debug/pprof/heap?pid=99999999999999999999",
		fmt.Sprintf("/debug/pprof/goroutine?pid=%d", tg.Pid),
		fmt.Sprintf("/debug/pprof/profile?pid=%d&seconds=1", tg.Pid),
		fmt.Sprintf("/pid/%d/debug/pprof/..%%2f..%%2fetc%%2fpasswd", tg.Pid),
		"/pid/1/debug/pprof/heap",
	} {
		if _, code, body := e.fetchProfile(t, path); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", path, code, body)
		}
	}
	if m := anonExec(t, tg.Pid); len(m) == 0 {
		t.Errorf("the profiled process has no sampler mapped")
	}
	if err := e.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("the exporter after SIGTERM: %v\n%s", err, e.Log())
	}
	if m := anonExec(t, tg.Pid); len(m) > 0 {
		t.Errorf("the sampler stays in the process after the exporter exited: %v\n%s", m, e.Log())
	}
	if last, code := tg.Quit(); last != "bye" || code != 0 {
		t.Errorf("the program after the exporter: %q, exit %d", last, code)
	}
}

// ownCgroup makes a cgroup in the hierarchy the exporter reads a process's
// cgroup from (systemd's named v1 hierarchy, else the unified one), for
// this test alone, and returns its path as /proc/PID/cgroup shows it and
// a function that moves a process into it (or, with back, out again).
func ownCgroup(t *testing.T) (string, func(pid int, back bool)) {
	t.Helper()
	root := "/sys/fs/cgroup/systemd"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		root = "/sys/fs/cgroup"
	}
	name := fmt.Sprintf("arenactl-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no cgroup can be made in %s: %v", root, err)
	}
	move := func(pid int, back bool) {
		to := dir
		if back {
			to = root
		}
		if err := os.WriteFile(filepath.Join(to, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
			t.Fatalf("moving %d into %s: %v", pid, to, err)
		}
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, p := range strings.Fields(string(b)) {
			os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(p), 0)
		}
		os.Remove(dir)
	})
	return "/" + name, move
}

// TestExporterProfileDeselected: a process profiled because it matches
// the exporter's matchers (--comm and --cgroup, the cgroup this test's
// own) has the sampler taken out when it stops matching (moved to another
// cgroup), while the exporter runs on; the process runs on, unharmed.
func TestExporterProfileDeselected(t *testing.T) {
	bin := testutil.BuildC(t, "record_phases.c", "-O2", "-g")
	cmd := exec.Command(bin, filepath.Join(t.TempDir(), "truth"), "hold")
	cmd.Env = append(os.Environ(), "PLATEAU_MS=100")
	tg := testutil.StartCmd(t, cmd)
	cg, move := ownCgroup(t)
	move(tg.Pid, false)
	e := startExporter(t, "--comm", "record_phases", "--cgroup", regexp.QuoteMeta(cg), "--profile-comm", "record_phases",
		"--discover-interval", "200ms", "--profile-every", "200ms")
	testutil.WaitUntil(t, "the first profile", func() bool {
		_, code, _ := e.fetchProfile(t, fmt.Sprintf("/debug/pprof/heap?pid=%d", tg.Pid))
		if code != http.StatusOK {
			time.Sleep(50 * time.Millisecond)
		}
		return code == http.StatusOK
	})
	if len(anonExec(t, tg.Pid)) == 0 {
		t.Fatalf("profiled, and no sampler mapped")
	}
	move(tg.Pid, true)
	testutil.WaitUntil(t, "the sampler to be taken out", func() bool {
		if len(anonExec(t, tg.Pid)) == 0 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
		return false
	})
	if !strings.Contains(e.Log(), "no longer selected") {
		t.Errorf("the exporter did not say the process left:\n%s", e.Log())
	}
	if a := tg.Send("go"); a != "phases done" {
		t.Fatalf("go: %q", a)
	}
	if last, code := tg.Quit(); last != "bye" || code != 0 {
		t.Errorf("the program after its sampler was taken out: %q, exit %d", last, code)
	}
}
