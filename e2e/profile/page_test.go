package profile

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/render/page"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The page of a real recording (record_phases.c: site A grows, then B,
// then C's mmapped blocks, A freed but resident, then trimmed): its
// embedded data equal to what the recording file holds, and rendered by
// headless Chromium with both charts, the heap bands split by the walks,
// and the sites on the flame graphs. ARENACTL_PAGE_SHOT=FILE keeps a
// screenshot.
func TestRecordPageOfPhases(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed")
	}
	bin := testutil.BuildC(t, "record_phases.c", "-O2", "-g")
	dir := t.TempDir()
	out, html := filepath.Join(dir, "rec"), filepath.Join(dir, "page.html")
	cmd := exec.Command(bin, filepath.Join(dir, "truth"))
	cmd.Env = append(os.Environ(), "PLATEAU_MS=800")
	tg := testutil.StartCmd(t, cmd)
	_, wait := startRecord(t, fmt.Sprint(tg.Pid), "-o", out, "--interval", "100ms", "--rate", "128K", "--walk-every", "300ms", "--walk-budget", "1,1")
	if a := tg.Send("go"); a != "phases done" {
		t.Fatalf("go: %q", a)
	}
	tg.ExitCode()
	if code, said := wait(); code != 0 {
		t.Fatalf("arenactl record: exit %d\n%s", code, said)
	}
	mustRun(t, "record", "page", out, "-o", html)
	rec, _, err := record.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<script id="data" type="application/json">(.*?)</script>`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no data on the page")
	}
	var got, want page.Data
	if err := json.Unmarshal(m[1], &got); err != nil {
		t.Fatal(err)
	}
	wb, _ := json.Marshal(page.NewData(rec))
	json.Unmarshal(wb, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the page's data is not the recording's")
	}
	walks := 0
	for _, iv := range rec.Intervals {
		if iv.Malloc != nil {
			walks++
		}
	}
	if len(got.Walks) != walks || walks < 2 {
		t.Errorf("%d walks on the page, %d recorded (want 2 at least)", len(got.Walks), walks)
	}
	if len(got.T) != len(rec.Intervals) || len(got.T) < 10 {
		t.Fatalf("%d intervals on the page, %d recorded", len(got.T), len(rec.Intervals))
	}
	for i, iv := range rec.Intervals {
		if got.Rss[i] != iv.Rss || len(got.Held[i]) != min(len(iv.Held), page.MaxStacks) {
			t.Errorf("interval %d: RSS %d, %d stacks; recorded %d, %d", i, got.Rss[i], len(got.Held[i]), iv.Rss, len(iv.Held))
		}
	}

	cmdline := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
		"--window-size=1400,2400", "--virtual-time-budget=5000", "--hide-scrollbars"}
	dom, err := exec.Command(browser, append(cmdline, "--dump-dom", "file://"+html)...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	d := string(dom)
	if !strings.Contains(d, `data-ready="1"`) || strings.Count(d, `class="uplot`) != 2 {
		t.Fatalf("the page did not render: %s", d[:min(len(d), 2000)])
	}
	for _, fn := range []string{"site_a", "site_b", "site_c"} {
		if !strings.Contains(d, `>`+fn+`<`) {
			t.Errorf("%s is not in the held chart's legend", fn)
		}
	}
	// The whole recording's range: B and C still held at its end, A freed.
	i := strings.Index(d, `id="range-flame"`)
	rng := d[i : i+strings.Index(d[i:], "</section>")]
	if !strings.Contains(rng, `data-name="site_b"`) || strings.Contains(rng, `data-name="site_a"`) {
		t.Errorf("the whole range's flame graph: want site_b, not site_a")
	}
	// The heap bands split by the walks (malloc's held, pinned and
	// trimmable bytes), the rest as before; the waterfall at the end says
	// which walk split it.
	for _, band := range []string{"heap (held or free in bins)", "malloc: held (walked)", "malloc: free, resident, pinned", "malloc: free, resident, trimmable"} {
		if !strings.Contains(d, `>`+band+`<`) {
			t.Errorf("no %q band in the RSS chart's legend", band)
		}
	}
	i = strings.Index(d, `id="waterfall"`)
	wf := d[i : i+strings.Index(d[i:], "</table>")]
	if !strings.Contains(wf, `data-line="malloc: held (walked)"`) || !regexp.MustCompile(`data-line="walk"><td>[^<]*</td><td class="n">walked `).MatchString(wf) {
		t.Errorf("the waterfall at the end is not split by a walk: %s", wf)
	}
	if !strings.Contains(d, `id="findings"`) {
		t.Errorf("no findings list")
	}
	if shot := os.Getenv("ARENACTL_PAGE_SHOT"); shot != "" {
		exec.Command(browser, append(cmdline, "--screenshot="+shot, "file://"+html)...).Run()
	}
}
