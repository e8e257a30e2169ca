package profile

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/arenactl/arenactl/internal/testutil"
)

// inuseBy sums a pprof file's inuse_space by the site_* function its
// samples' stacks name (one each in record_phases.c), and the samples'
// count.
func inuseBy(t *testing.T, path string) (map[string]int64, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("%s has no inuse_space: %v", path, p.SampleType)
	}
	out := map[string]int64{}
	for _, s := range p.Sample {
		site := "other"
		for _, l := range s.Location {
			for _, ln := range l.Line {
				if ln.Function != nil && strings.HasPrefix(ln.Function.Name, "site_") {
					site = ln.Function.Name
				}
			}
		}
		out[site] += s.Value[idx]
	}
	return out, len(p.Sample)
}

// TestRecordPprofRange: `record pprof` of a recording of
// testdata/record_phases.c writes a pprof file of what was held at a time
// (--to) and one of what a range added (--from --to). The range's file is
// what go tool pprof -diff_base of the two times' files shows (it runs on
// them and names site_b; pprof's parser gives, for every site, the range's
// value equal to the difference within the rounding of each file's
// values); site_a, steady over the range (grown before it, freed after),
// adds nothing, and site_b adds its 32 MiB within 4.5 standard errors of
// the sampling. Times out of the recording, a --from after --to and an -o
// that is a directory are refused with exit 2.
func TestRecordPprofRange(t *testing.T) {
	bin := testutil.BuildC(t, "record_phases.c", "-O2", "-g")
	dir := t.TempDir()
	truthPath, rec := filepath.Join(dir, "truth"), filepath.Join(dir, "rec")
	cmd := exec.Command(bin, truthPath)
	cmd.Env = append(os.Environ(), "PLATEAU_MS=600")
	tg := testutil.StartCmd(t, cmd)
	_, wait := startRecord(t, fmt.Sprint(tg.Pid), "-o", rec, "--interval", "100ms", "--rate", "128K")
	if a := tg.Send("go"); a != "phases done" {
		t.Fatalf("go: %q", a)
	}
	tg.ExitCode()
	if code, said := wait(); code != 0 {
		t.Fatalf("arenactl record: exit %d\n%s", code, said)
	}
	// The middle of phase 1's plateau and of phase 2's: A grown, then A
	// and B.
	truth := readTruth(t, truthPath)
	mid := func(phase int) time.Time {
		var first, last time.Time
		for _, l := range truth {
			if l.phase == phase {
				if first.IsZero() {
					first = l.at
				}
				last = l.at
			}
		}
		return first.Add(last.Sub(first) * 3 / 4)
	}
	t1, t2 := mid(1).Format(time.RFC3339Nano), mid(2).Format(time.RFC3339Nano)
	a, b, r := filepath.Join(dir, "a.pb.gz"), filepath.Join(dir, "b.pb.gz"), filepath.Join(dir, "r.pb.gz")
	mustRun(t, "record", "pprof", rec, "--to", t1, "-o", a)
	mustRun(t, "record", "pprof", rec, "--to", t2, "-o", b)
	mustRun(t, "record", "pprof", rec, "--from", t1, "--to", t2, "-o", r)

	out, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-diff_base", a, b).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "site_b") {
		t.Errorf("go tool pprof -diff_base %s %s: %v\n%s", a, b, err, out)
	}
	pa, na := inuseBy(t, a)
	pb, nb := inuseBy(t, b)
	pr, _ := inuseBy(t, r)
	t.Logf("held at %s: %v; at %s: %v; the range: %v", t1, pa, t2, pb, pr)
	for _, site := range []string{"site_a", "site_b", "site_c", "other"} {
		// Each file rounds each sample's value: a byte each.
		if d := pr[site] - (pb[site] - pa[site]); d < -int64(na+nb) || d > int64(na+nb) {
			t.Errorf("%s: the range's file says %d, -diff_base %d", site, pr[site], pb[site]-pa[site])
		}
	}
	if pa["site_a"] == 0 || pr["site_a"] != 0 {
		t.Errorf("site_a: held %d at the range's start, added %d in it: want held, nothing added", pa["site_a"], pr["site_a"])
	}
	const bBytes, bBlock, rate = 682 * 48 << 10, 48 << 10, 128 << 10
	p := 1 - math.Exp(-float64(bBlock)/rate)
	sigma := math.Sqrt(682 * bBlock * bBlock * (1 - p) / p)
	if math.Abs(float64(pr["site_b"]-bBytes)) > 4.5*sigma {
		t.Errorf("site_b added %d bytes in the range, the program %d (σ %.0f)", pr["site_b"], bBytes, sigma)
	}

	for _, args := range [][]string{
		{"--to", "100h"},
		{"--to", "1999-01-01T00:00:00Z"},
		{"--from", t2, "--to", t1},
		{"--to", "yesterday"},
	} {
		res := run(t, append([]string{"record", "pprof", rec, "-o", filepath.Join(dir, "bad.pb.gz")}, args...)...)
		if res.Code != exitUsage || strings.Count(strings.TrimSpace(res.Stderr), "\n") > 0 {
			t.Errorf("record pprof %v: exit %d, %q; want 2 and one line", args, res.Code, res.Stderr)
		}
	}
	if res := run(t, "record", "pprof", rec, "-o", dir); res.Code == 0 {
		t.Errorf("record pprof -o DIR: exit 0")
	}
}
