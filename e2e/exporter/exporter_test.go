package exporter

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// The exporter is tested as it runs: the real binary serving real HTTP,
// reading real C targets, scraped by promtool, by a burst of clients and by
// a real Prometheus server.

// exporterProc is a running `arenactl exporter`.
type exporterProc struct {
	url     string // http://127.0.0.1:PORT
	cmd     *exec.Cmd
	mu      sync.Mutex
	log     strings.Builder
	start   time.Time
	done    chan struct{} // its stderr reached EOF
	stopped bool
}

// startExporter runs the exporter on a free loopback port with args, and
// waits until it serves. When the test ends it is sent SIGTERM and must
// exit 0, without a panic.
func startExporter(t *testing.T, args ...string) *exporterProc {
	t.Helper()
	return startExporterAs(t, nil, args...)
}

// startExporterAs is startExporter with credentials (nil: ours).
func startExporterAs(t *testing.T, cred *syscall.Credential, args ...string) *exporterProc {
	t.Helper()
	e := &exporterProc{start: time.Now()}
	e.cmd = exec.Command(arenactl, append([]string{"exporter", "--listen", "127.0.0.1:0"}, args...)...)
	if cred != nil {
		e.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	startedExporter(t, e)
	return e
}

// startedExporter starts e.cmd, an exporter on a free loopback port, and
// waits until it serves; see startExporter.
func startedExporter(t *testing.T, e *exporterProc) {
	t.Helper()
	stderr, err := e.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	e.done = make(chan struct{})
	done := e.done
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`serving http://([0-9.:]+)/metrics`)
		for sc.Scan() {
			e.mu.Lock()
			e.log.WriteString(sc.Text() + "\n")
			e.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		if e.stopped {
			return
		}
		if err := e.stop(syscall.SIGTERM); err != nil {
			t.Errorf("exporter after SIGTERM: %v\n%s", err, e.Log())
		}
		if l := e.Log(); strings.Contains(l, "panic:") || strings.Contains(l, "goroutine ") {
			t.Errorf("the exporter panicked:\n%s", l)
		}
	})
	select {
	case a := <-addr:
		e.url = "http://" + a
	case <-done:
		t.Fatalf("the exporter exited before serving: %s", e.Log())
	case <-time.After(testutil.Patience):
		t.Fatalf("the exporter never served: %s", e.Log())
	}
}

// stop sends sig and waits for the exporter to exit.
func (e *exporterProc) stop(sig syscall.Signal) error {
	e.stopped = true
	e.cmd.Process.Signal(sig)
	<-e.done
	return e.cmd.Wait()
}

func (e *exporterProc) Log() string { e.mu.Lock(); defer e.mu.Unlock(); return e.log.String() }

// scrape fetches /metrics once.
func (e *exporterProc) scrape(t testing.TB) metricSet {
	t.Helper()
	text, err := e.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return parseMetrics(t, text)
}

func (e *exporterProc) get(path string) (string, error) {
	resp, err := http.Get(e.url + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

// waitFor scrapes until cond holds of the metrics (never a timing
// assertion: Patience is the safety net).
func (e *exporterProc) waitFor(t *testing.T, what string, cond func(metricSet) bool) metricSet {
	t.Helper()
	var m metricSet
	testutil.WaitUntil(t, what, func() bool {
		m = e.scrape(t)
		if cond(m) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
		return false
	})
	return m
}

// sample is one line of the text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

type metricSet struct {
	text    string
	samples []sample
}

var (
	sampleRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func parseMetrics(t testing.TB, text string) metricSet {
	t.Helper()
	ms := metricSet{text: text}
	for _, l := range strings.Split(text, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := sampleRe.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a sample line: %q", l)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, lm := range labelRe.FindAllStringSubmatch(m[2], -1) {
			s.labels[lm[1]] = lm[2]
		}
		ms.samples = append(ms.samples, s)
	}
	return ms
}

// find returns the samples of name whose labels include want (given as
// name, value pairs).
func (ms metricSet) find(name string, want ...string) []sample {
	var out []sample
next:
	for _, s := range ms.samples {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(want); i += 2 {
			if s.labels[want[i]] != want[i+1] {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// value is the one sample of name with those labels; ok is false when there
// is none.
func (ms metricSet) value(name string, want ...string) (float64, bool) {
	s := ms.find(name, want...)
	if len(s) != 1 {
		return 0, false
	}
	return s[0].value, true
}

// hasPid reports whether any series carries pid.
func (ms metricSet) hasPid(pid int) bool {
	for _, s := range ms.samples {
		if s.labels["pid"] == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

// uniqueName is an executable name (and so a comm) that no other process
// on the machine has: the exporter's --comm matcher must find only ours.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1e7)
}

// copyAs copies bin under a new name into the test's directory.
func copyAs(t *testing.T, bin, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	copyFile(t, bin, out)
	return out
}

// roInfo is the part of `info --read-only --json` the exporter's values are
// checked against.
type roInfo struct {
	Threads int `json:"threads"`
	Arenas  []struct {
		Index         int     `json:"index"`
		SystemCurrent uint64  `json:"system_current"`
		SystemMax     uint64  `json:"system_max"`
		InUse         uint64  `json:"in_use_bytes"`
		FastCount     *uint64 `json:"fast_count"`
		FastBytes     *uint64 `json:"fast_bytes"`
		RestCount     uint64  `json:"rest_count"`
		RestBytes     uint64  `json:"rest_bytes"`
		Walk          struct {
			AttachedThreads uint64 `json:"attached_threads"`
			TopSize         uint64 `json:"top_size"`
			Heaps           []any  `json:"heaps"`
			TcacheBytes     uint64 `json:"tcache_bytes"`
			LargestFree     uint64 `json:"largest_free_chunk"`
			Trimmable       uint64 `json:"trimmable_bytes"`
		} `json:"walk"`
	} `json:"arenas"`
	Totals struct {
		MmapCount *uint64 `json:"mmap_count"`
		MmapBytes *uint64 `json:"mmap_bytes"`
	} `json:"totals"`
	Findings []struct {
		ID      string `json:"id"`
		Savings uint64 `json:"savings_bytes"`
	} `json:"findings"`
}

func readOnlyJSONOf(t *testing.T, pid int) roInfo {
	t.Helper()
	r := mustRun(t, "info", "--read-only", "--json", strconv.Itoa(pid))
	var info roInfo
	if err := json.Unmarshal([]byte(r.Stdout), &info); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	if len(info.Arenas) < 2 {
		t.Fatalf("want a multi-arena target, got %d arenas", len(info.Arenas))
	}
	return info
}

// arenaValues are the per-arena numbers both sides give, by "metric/arena".
func arenaValuesJSON(info roInfo) map[string]float64 {
	out := map[string]float64{}
	for _, a := range info.Arenas {
		i := strconv.Itoa(a.Index)
		out["arenactl_arena_system_bytes/"+i] = float64(a.SystemCurrent)
		out["arenactl_arena_system_max_bytes/"+i] = float64(a.SystemMax)
		out["arenactl_arena_in_use_bytes/"+i] = float64(a.InUse)
		fast := uint64(0)
		if a.FastBytes != nil {
			fast = *a.FastBytes
		}
		out["arenactl_arena_free_bytes{fast}/"+i] = float64(fast)
		out["arenactl_arena_free_bytes{rest}/"+i] = float64(a.RestBytes)
		out["arenactl_arena_top_bytes/"+i] = float64(a.Walk.TopSize)
		out["arenactl_arena_trimmable_bytes/"+i] = float64(a.Walk.Trimmable)
		out["arenactl_arena_heaps/"+i] = float64(len(a.Walk.Heaps))
		out["arenactl_arena_threads/"+i] = float64(a.Walk.AttachedThreads)
		out["arenactl_arena_tcache_bytes/"+i] = float64(a.Walk.TcacheBytes)
		out["arenactl_arena_largest_free_bytes/"+i] = float64(a.Walk.LargestFree)
	}
	return out
}

// arenaKey is the key of arenaValuesJSON for a sample.
func arenaKey(name string, labels map[string]string) string {
	if b := labels["bins"]; b != "" {
		name += "{" + b + "}"
	}
	return name + "/" + labels["arena"]
}

func arenaValuesScraped(ms metricSet, pid int) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ms.samples {
		if strings.HasPrefix(s.name, "arenactl_arena_") && s.labels["pid"] == strconv.Itoa(pid) &&
			!strings.HasPrefix(s.name, "arenactl_arena_free_chunks") {
			out[arenaKey(s.name, s.labels)] = s.value
		}
	}
	return out
}

func compareValues(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: no %s (want %v)", what, k, w)
		case g != w:
			t.Errorf("%s: %s = %v, info --read-only --json says %v", what, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %s has no counterpart in info --read-only --json", what, k)
		}
	}
}

func upOf(ms metricSet, pid int) (float64, bool) {
	return ms.value("arenactl_target_up", "pid", strconv.Itoa(pid))
}

// collected reports whether every pid has been collected at least once.
func collected(ms metricSet, pids ...int) bool {
	for _, pid := range pids {
		if v, ok := ms.value("arenactl_collections_total", "pid", strconv.Itoa(pid)); !ok || v < 1 {
			return false
		}
	}
	return true
}

// The exporter's output passes promtool's checks; its values for a
// multi-arena target found by name are info --read-only's; another
// allocator is an error metric, a static glibc executable is read; a target
// that exits is gone from the next scrape; a process started later is
// found by the next discovery.
func TestExporterMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian's prometheus package)")
	}
	name := uniqueName("arx")
	bin := copyAs(t, testutil.BuildC(t, "arenas.c"), name)
	idle := testutil.BuildC(t, "idle.c")
	args := []string{"--comm", name, "--min-interval", "1s", "--freeze-budget", "1", "--discover-interval", "300ms"}

	var others []*testutil.Target
	var jemalloc, static *testutil.Target
	if lib := "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"; fileExists(lib) {
		cmd := exec.Command(idle)
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
		jemalloc = testutil.StartCmd(t, cmd)
		others = append(others, jemalloc)
		args = append(args, "--pid", strconv.Itoa(jemalloc.Pid))
	} else {
		t.Log("libjemalloc2 is not installed: no jemalloc target")
	}
	if fileExists("/usr/lib/x86_64-linux-gnu/libc.a") {
		static = testutil.Start(t, testutil.BuildC(t, "idle.c", "-static"))
		others = append(others, static)
		args = append(args, "--pid", strconv.Itoa(static.Pid))
	}
	var musl *testutil.Target
	if _, err := exec.LookPath("musl-gcc"); err == nil {
		musl = testutil.Start(t, testutil.BuildCWith(t, "musl-gcc", "idle.c"))
		others = append(others, musl)
		args = append(args, "--pid", strconv.Itoa(musl.Pid))
	}
	// A heap damaged where glibc's own walk would loop: the read-only walk
	// counts the damage and leaves the target as it was.
	damaged := testutil.Start(t, testutil.BuildC(t, "corrupt.c"))
	if a := damaged.Send("cycle"); !strings.HasPrefix(a, "ok ") {
		t.Fatalf("corrupt.c cycle: %q", a)
	}
	others = append(others, damaged)
	args = append(args, "--pid", strconv.Itoa(damaged.Pid))
	// Given and gone before the exporter starts: said as down, with why,
	// and nothing else (issue 22 item 10; TestMissingPidIsSaid has the
	// details).
	args = append(args, "--pid", "99999999")

	tg := testutil.Start(t, bin, "park", "3")
	// Read before the exporter runs: it would hold the target for a
	// moment every second. The target is quiescent: its numbers stay.
	want := arenaValuesJSON(readOnlyJSONOf(t, tg.Pid))
	e := startExporter(t, args...)
	ms := e.waitFor(t, "a collection of every target", func(ms metricSet) bool {
		pids := []int{tg.Pid}
		for _, o := range others {
			pids = append(pids, o.Pid)
		}
		return collected(ms, pids...)
	})

	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(ms.text)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\n%s", err, out, ms.text)
	}

	if up, _ := upOf(ms, tg.Pid); up != 1 {
		t.Fatalf("target_up of the arenas target = %v\n%s\n%s", up, ms.text, e.Log())
	}
	compareValues(t, "scraped", arenaValuesScraped(ms, tg.Pid), want)
	pid := strconv.Itoa(tg.Pid)
	if v, ok := ms.value("arenactl_target_info", "pid", pid, "comm", name, "exe", bin); !ok || v != 1 {
		t.Errorf("no target_info for %s (%s)", name, bin)
	}
	for _, n := range []string{"arenactl_collection_freeze_seconds", "arenactl_collection_walk_seconds", "arenactl_collection_duration_seconds",
		"arenactl_last_success_timestamp_seconds", "arenactl_snapshot_age_seconds", "arenactl_process_threads"} {
		if v, ok := ms.value(n, "pid", pid); !ok || v <= 0 {
			t.Errorf("%s = %v, %v", n, v, ok)
		}
	}
	// The walk (of an image, after the freeze) and the freeze happen
	// within the collection.
	walk, _ := ms.value("arenactl_collection_walk_seconds", "pid", pid)
	freeze, _ := ms.value("arenactl_collection_freeze_seconds", "pid", pid)
	took, _ := ms.value("arenactl_collection_duration_seconds", "pid", pid)
	if walk > took || freeze > took {
		t.Errorf("walk %vs, freeze %vs, collection %vs: not within the collection", walk, freeze, took)
	}
	if v, ok := ms.value("arenactl_memory_rss_bytes", "pid", pid, "class", "arena-heap"); !ok || v <= 0 {
		t.Errorf("arena-heap RSS = %v, %v", v, ok)
	}
	if v, ok := ms.value("arenactl_libc_info", "pid", pid, "static", "false"); !ok || v != 1 {
		t.Error("no libc_info for the dynamic target")
	}

	if jemalloc != nil {
		jp := strconv.Itoa(jemalloc.Pid)
		if up, ok := upOf(ms, jemalloc.Pid); !ok || up != 0 {
			t.Errorf("jemalloc target: up = %v, %v", up, ok)
		}
		if _, ok := ms.value("arenactl_target_error", "pid", jp, "reason", "not_glibc"); !ok {
			t.Errorf("jemalloc target: no not_glibc error\n%s", ms.text)
		}
		if v, _ := ms.value("arenactl_collection_errors_total", "pid", jp, "reason", "not_glibc"); v < 1 {
			t.Errorf("jemalloc target: errors_total{not_glibc} = %v", v)
		}
		if len(ms.find("arenactl_arena_system_bytes", "pid", jp)) > 0 {
			t.Error("jemalloc target has arena series")
		}
	}
	if musl != nil {
		if _, ok := ms.value("arenactl_target_error", "pid", strconv.Itoa(musl.Pid), "reason", "not_glibc"); !ok {
			t.Errorf("musl target: no not_glibc error")
		}
	}
	dp := strconv.Itoa(damaged.Pid)
	if v, ok := ms.value("arenactl_heap_damage", "pid", dp); !ok || v < 1 {
		up, _ := upOf(ms, damaged.Pid)
		t.Errorf("damaged target: heap_damage %v, %v (up %v)\n%s", v, ok, up, e.Log())
	}
	if a := damaged.Send("check"); a != "ok" {
		t.Errorf("damaged target after its collections: %q", a)
	}
	if static != nil {
		sp := strconv.Itoa(static.Pid)
		if up, _ := upOf(ms, static.Pid); up != 1 {
			t.Errorf("static glibc target: up = %v (its own glibc malloc is readable)\n%s", up, e.Log())
		}
		if _, ok := ms.value("arenactl_libc_info", "pid", sp, "static", "true"); !ok {
			t.Error("static glibc target: no libc_info static=\"true\"")
		}
	}
	for _, s := range ms.samples {
		if s.labels["pid"] == "99999999" && s.name != "arenactl_target_up" && s.name != "arenactl_target_error" {
			t.Errorf("a PID that does not exist has the series %s", s.name)
		}
	}
	if up, ok := upOf(ms, 99999999); ok && up != 0 {
		t.Errorf("a PID that does not exist is up (%v)", up)
	}

	// A second process of the same name, started now, is found by the next
	// discovery; the first, once it has exited, is gone from the very next
	// scrape.
	tg2 := testutil.Start(t, bin, "park", "2")
	e.waitFor(t, "the exporter to find the process started later", func(ms metricSet) bool { return collected(ms, tg2.Pid) })
	mustQuit(t, tg)
	if ms := e.scrape(t); ms.hasPid(tg.Pid) {
		t.Errorf("process %d exited, but the next scrape still has its series", tg.Pid)
	} else if !ms.hasPid(tg2.Pid) {
		t.Errorf("process %d is gone from the scrape too", tg2.Pid)
	}
	mustQuit(t, tg2)
	for _, o := range others {
		o.Quit()
	}
	// The page at / says what this is; nothing else is served.
	if page, err := e.get("/"); err != nil || !strings.Contains(page, "metrics") {
		t.Errorf("GET /: %v %q", err, page)
	}
	if _, err := e.get("/debug"); err == nil {
		t.Error("GET /debug succeeded")
	}
}

// A burst of scrapes freezes nothing: each target is collected on its own
// schedule, at most once per --min-interval, and the targets find their
// heaps intact afterwards.
func TestExporterScrapeStorm(t *testing.T) {
	const minInterval = time.Second
	a := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "2")
	b := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "3")
	e := startExporter(t, "--pid", strconv.Itoa(a.Pid), "--pid", strconv.Itoa(b.Pid),
		"--min-interval", minInterval.String(), "--freeze-budget", "1", "--concurrency", "2")
	e.waitFor(t, "a first collection of both targets", func(ms metricSet) bool { return collected(ms, a.Pid, b.Pid) })

	const burst = 100
	var wg sync.WaitGroup
	errs := make(chan error, burst)
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, err := e.get("/metrics")
			if err == nil && !strings.Contains(text, fmt.Sprintf(`arenactl_target_up{comm="arenas",pid="%d"} 1`, a.Pid)) {
				err = fmt.Errorf("a scrape lacks target %d", a.Pid)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// And a steady stream across more than two intervals: the schedule,
	// not the scrapes, decides when a target is read.
	for i := 0; time.Since(e.start) < 3*minInterval; i++ {
		if _, err := e.get("/metrics"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ms := e.scrape(t)
	// Collections are at least minInterval apart, the first at the start:
	// however many scrapes came, a target was read at most this often.
	allowed := 1 + int(time.Since(e.start)/minInterval)
	for _, tg := range []*testutil.Target{a, b} {
		n, _ := ms.value("arenactl_collections_total", "pid", strconv.Itoa(tg.Pid))
		t.Logf("target %d: %v collections in %s", tg.Pid, n, time.Since(e.start).Round(time.Millisecond))
		if int(n) > allowed {
			t.Errorf("target %d was collected %v times, at most %d allowed by --min-interval %s", tg.Pid, n, allowed, minInterval)
		}
		if got := tg.Send("check"); got != "ok" {
			t.Errorf("target %d after the storm: %q", tg.Pid, got)
		}
		mustQuit(t, tg)
	}
}

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// promServer is a Prometheus server the test started.
type promServer struct{ url string }

// query runs an instant query through Prometheus's HTTP API and returns
// each series' labels and value.
func (p *promServer) query(t *testing.T, q string) []sample {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	var out []sample
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", q, s.Value)
		}
		out = append(out, sample{name: s.Metric["__name__"], labels: s.Metric, value: v})
	}
	return out
}

// startPrometheus runs a Prometheus server on a loopback port with its own
// configuration and storage, scraping target every second.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian's prometheus package)")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	err = os.WriteFile(conf, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: arenactl
    static_configs:
      - targets: ['%s']
`, target)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var log strings.Builder
	var mu sync.Mutex
	w := promLogWriter(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return log.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	p := &promServer{url: "http://" + addr}
	testutil.WaitUntil(t, "Prometheus to be ready", func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

type promLogWriter func([]byte) (int, error)

func (f promLogWriter) Write(p []byte) (int, error) { return f(p) }

// A real Prometheus server scrapes the exporter: what its HTTP API gives
// back for a multi-arena target equals info --read-only --json on the same
// quiescent target; a jemalloc target is an error series; a target that
// exits goes stale, so queries stop returning it.
func TestExporterPrometheus(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "3")
	args := []string{"--pid", strconv.Itoa(tg.Pid), "--min-interval", "1s", "--freeze-budget", "1"}
	var jemalloc *testutil.Target
	if lib := "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"; fileExists(lib) {
		cmd := exec.Command(testutil.BuildC(t, "idle.c"))
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
		jemalloc = testutil.StartCmd(t, cmd)
		args = append(args, "--pid", strconv.Itoa(jemalloc.Pid))
	}
	// Read before the exporter runs (see TestExporterMetrics).
	want := arenaValuesJSON(readOnlyJSONOf(t, tg.Pid))
	e := startExporter(t, args...)
	p := startPrometheus(t, strings.TrimPrefix(e.url, "http://"))
	pid := strconv.Itoa(tg.Pid)

	sel := fmt.Sprintf(`{__name__=~"arenactl_arena_.*", __name__!="arenactl_arena_free_chunks", pid="%s"}`, pid)
	var got map[string]float64
	testutil.WaitUntil(t, "Prometheus to have scraped every arena series twice", func() bool {
		// Two scrapes at least: the series has two samples in the window.
		n := p.query(t, fmt.Sprintf(`count_over_time(arenactl_arena_system_bytes{pid="%s"}[1m]) >= 2`, pid))
		if len(n) != 3+1 {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		got = map[string]float64{}
		for _, s := range p.query(t, sel) {
			got[arenaKey(s.name, s.labels)] = s.value
		}
		return len(got) == len(want)
	})
	compareValues(t, "queried from Prometheus", got, want)
	if up := p.query(t, `up{job="arenactl"}`); len(up) != 1 || up[0].value != 1 {
		t.Errorf("Prometheus's up for the exporter: %+v", up)
	}
	if jemalloc != nil {
		testutil.WaitUntil(t, "the jemalloc target's error in Prometheus", func() bool {
			r := p.query(t, fmt.Sprintf(`arenactl_target_error{pid="%d", reason="not_glibc"} == 1`, jemalloc.Pid))
			if len(r) == 0 {
				time.Sleep(200 * time.Millisecond)
			}
			return len(r) == 1
		})
		jemalloc.Quit()
	}

	mustQuit(t, tg)
	testutil.WaitUntil(t, "the exited target to go stale in Prometheus", func() bool {
		r := p.query(t, fmt.Sprintf(`arenactl_target_up{pid="%s"}`, pid))
		if len(r) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		return len(r) == 0
	})
}

// A command line that cannot work is one line and exit 2, before anything
// is listened on or read.
func TestExporterUsage(t *testing.T) {
	expectRefusal(t, run(t, "exporter"), exitUsage, "--pid or a matcher")
	expectRefusal(t, run(t, "exporter", "--comm", "("), exitUsage, `--comm "("`)
	expectRefusal(t, run(t, "exporter", "--pid", "0"), exitUsage, "--pid 0")
	expectRefusal(t, run(t, "exporter", "--pid", "1", "--min-interval", "0s"), exitUsage, "--min-interval")
	expectRefusal(t, run(t, "exporter", "--pid", "1", "--freeze-budget", "2"), exitUsage, "--freeze-budget")
	expectRefusal(t, run(t, "exporter", "--pid", "1", "extra"), exitUsage)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	expectRefusal(t, run(t, "exporter", "--pid", "1", "--listen", l.Addr().String()), exitError, "address already in use")
}

// threadsRunning reports whether every thread of pid is out of any ptrace
// or job-control stop and has no tracer.
func threadsRunning(pid int) bool {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, ent := range ents {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, ent.Name()))
		if i := strings.LastIndexByte(string(st), ')'); i < 0 || i+2 >= len(st) || st[i+2] == 't' || st[i+2] == 'T' {
			return false
		}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, ent.Name()))
		if !strings.Contains(string(status), "\nTracerPid:\t0\n") {
			return false
		}
	}
	return true
}

// Killed or stopped at any moment, collections under way included, the
// exporter leaves its target running, untraced and intact: SIGTERM lets the
// walk finish and exits 0; SIGKILL leaves the kernel to detach.
func TestExporterKilledMidCollection(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "3")
	for round := 0; round < 6; round++ {
		sig := syscall.SIGKILL
		if round%2 == 1 {
			sig = syscall.SIGTERM
		}
		// Back-to-back collections: most moments are inside one.
		e := startExporter(t, "--pid", strconv.Itoa(tg.Pid), "--min-interval", "10ms", "--freeze-budget", "1")
		e.waitFor(t, "a first collection", func(ms metricSet) bool { return collected(ms, tg.Pid) })
		time.Sleep(time.Duration(round*37%150) * time.Millisecond)
		err := e.stop(sig)
		if sig == syscall.SIGTERM && err != nil {
			t.Errorf("round %d: exporter after SIGTERM: %v\n%s", round, err, e.Log())
		}
		testutil.WaitUntil(t, "every thread of the target to run untraced", func() bool { return threadsRunning(tg.Pid) })
		if a := tg.Send("check"); a != "ok" {
			t.Fatalf("round %d (%v): target says %q", round, sig, a)
		}
	}
	mustQuit(t, tg)
}

// An exporter that may not read a target (another user's, without
// CAP_SYS_PTRACE) says so in a series of its own and goes on.
func TestExporterPermission(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the exporter as another user")
	}
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c"))
	e := startExporterAs(t, &syscall.Credential{Uid: 65534, Gid: 65534},
		"--pid", strconv.Itoa(tg.Pid), "--min-interval", "1s")
	ms := e.waitFor(t, "a collection", func(ms metricSet) bool { return collected(ms, tg.Pid) })
	if _, ok := ms.value("arenactl_target_error", "pid", strconv.Itoa(tg.Pid), "reason", "permission"); !ok {
		t.Errorf("no permission error for a root process read by nobody\n%s\n%s", ms.text, e.Log())
	}
	if up, _ := upOf(ms, tg.Pid); up != 0 {
		t.Errorf("target_up %v", up)
	}
	tg.Quit()
}

// A target a debugger holds is skipped with reason traced, and read once
// the debugger has let it go.
func TestExporterTraced(t *testing.T) {
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		t.Skip("gdb is not installed")
	}
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "2")
	g := exec.Command(gdb, "-q", "-nx", "-batch", "-p", strconv.Itoa(tg.Pid), "-ex", "shell sleep 60")
	g.Stdout, g.Stderr = io.Discard, io.Discard
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			g.Process.Signal(syscall.SIGTERM)
			g.Wait()
			// gdb attached with SIGSTOP: killed, it leaves the target
			// stopped. One SIGCONT continues it, even when it lands while
			// the exporter holds the stopped target (the stop it gives
			// back then is dropped: internal/live's TestSIGCONTWhile*).
			syscall.Kill(tg.Pid, syscall.SIGCONT)
			if !eventually(func() bool {
				s := processState(tg.Pid)
				return s != 'T' && s != 't'
			}) {
				t.Fatalf("target %d stays stopped after SIGCONT", tg.Pid)
			}
		}
	}
	defer release()
	testutil.WaitUntil(t, "gdb to attach", func() bool { return testutil.Traced(tg.Pid) })
	e := startExporter(t, "--pid", strconv.Itoa(tg.Pid), "--min-interval", "200ms")
	e.waitFor(t, "the traced error", func(ms metricSet) bool {
		_, ok := ms.value("arenactl_target_error", "pid", strconv.Itoa(tg.Pid), "reason", "traced")
		return ok
	})
	release()
	// Failures back off (200ms, 400ms, ...): the next try reads it.
	e.waitFor(t, "a successful collection after gdb left", func(ms metricSet) bool {
		up, _ := upOf(ms, tg.Pid)
		return up == 1
	})
	mustQuit(t, tg)
}
