package exporter

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

var metricRe = regexp.MustCompile(`\barenactl_[a-z_]+\b`)

// The Grafana dashboard is a dashboard (valid JSON, panels with queries),
// and every metric its queries name is one the exporter emits.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "contrib", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Type    string `json:"type"`
			GridPos struct {
				X, Y, W, H int
			} `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("not a dashboard: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	known := MetricNames()
	check := func(where, expr string) {
		names := metricRe.FindAllString(expr, -1)
		if len(names) == 0 && strings.Contains(where, "panel") {
			t.Errorf("%s: %q queries no arenactl metric", where, expr)
		}
		for _, n := range names {
			if !slices.Contains(known, n) {
				t.Errorf("%s: %q names %s, which the exporter does not emit", where, expr, n)
			}
		}
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if p.Title == "" || p.Type == "" || len(p.Targets) == 0 || ids[p.ID] || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %d %q: type %q, %d queries, at %+v (ids must be unique, the grid 24 wide)", p.ID, p.Title, p.Type, len(p.Targets), p.GridPos)
		}
		ids[p.ID] = true
		for _, q := range p.Targets {
			if q.RefID == "" || q.Expr == "" {
				t.Errorf("panel %q: query %+v", p.Title, q)
			}
			check("panel "+p.Title, q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			check("variable "+v.Name, q)
		}
	}
}

// The scrape configuration is one Prometheus accepts.
func TestScrapeConfig(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian's prometheus package)")
	}
	conf := filepath.Join(testutil.RepoRoot(t), "contrib", "prometheus.yml")
	if out, err := exec.Command(promtool, "check", "config", conf).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// The systemd unit is one systemd accepts (its ExecStart pointed at a
// binary that exists, which is all verify would otherwise miss here).
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "contrib", "arenactl-exporter.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	if !strings.Contains(unit, "ExecStart=/usr/local/bin/arenactl exporter ") {
		t.Fatal("the unit does not run /usr/local/bin/arenactl exporter")
	}
	for _, want := range []string{"CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_OVERRIDE", "--listen 127.0.0.1:"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "arenactl-exporter.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/arenactl", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The exporter's page lists every metric.
func TestDocsListMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "docs", "commands", "exporter.md"))
	if err != nil {
		t.Fatal(err)
	}
	sec := string(b)
	for _, n := range MetricNames() {
		if !strings.Contains(sec, "`"+n+"`") {
			t.Errorf("docs/commands/exporter.md does not list `%s`", n)
		}
	}
	for _, n := range metricRe.FindAllString(sec, -1) {
		if !slices.Contains(MetricNames(), n) {
			t.Errorf("docs/commands/exporter.md names %s, which the exporter does not emit", n)
		}
	}
}
