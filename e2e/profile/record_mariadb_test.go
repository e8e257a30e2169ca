package profile

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/report"
)

// rssRead is a process's Rss as /proc/PID/smaps_rollup sums it (the
// kernel's walk of its page tables, exact, where status's VmRSS is a
// per-CPU counter that lags), with when it was read.
type rssRead struct {
	at  time.Time
	rss uint64
}

func smapsRollupRss(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Rss:"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10, err == nil
		}
	}
	return 0, false
}

var slapSeconds = regexp.MustCompile(`Average number of seconds to run all queries: ([0-9.]+) seconds`)

// slapRate runs one mariadb-slap of clients clients and queries mixed
// statements and returns its queries per second.
func (m *mariadb) slapRate(t *testing.T, clients, queries int) float64 {
	t.Helper()
	var out bytes.Buffer
	c := m.slap(clients, 1, queries)
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		t.Fatalf("mariadb-slap: %v\n%s", err, out.String())
	}
	mm := slapSeconds.FindStringSubmatch(out.String())
	if mm == nil {
		t.Fatalf("mariadb-slap said no time:\n%s", out.String())
	}
	s, _ := strconv.ParseFloat(mm[1], 64)
	return float64(queries) / max(s, 0.001)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// TestRecordMariaDB records mariadbd under mariadb-slap (16 clients, the
// mixed workload) at record's defaults (--interval 1s, --rate 512K),
// alternating: slaps without a recording, then the same slaps with one,
// rounds times. Each recording ends cleanly on SIGINT and the server
// answers throughout. At every interval the RSS by memory class adds up
// to the interval's RSS, and that RSS is the process's (smaps_rollup,
// read by the test every 200 ms) within 1 % of the two reads around when
// the recording read it. The throughput with and without is logged (the
// ratio of the medians, and each round's), not asserted: a test asserts
// no time, and this machine is shared. The CI form: 2 rounds of one slap
// of about 5 s each; ARENACTL_SOAK=1: 3 rounds of 3 slaps of about 40 s
// each (recordings of 2 minutes and more); docs/commands/record.md has the
// figures.
func TestRecordMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and loads a real MariaDB server")
	}
	rounds, slaps, target := 2, 1, 5*time.Second
	if os.Getenv("ARENACTL_SOAK") != "" {
		rounds, slaps, target = 3, 3, 40*time.Second
	}
	const clients = 16
	m := startMariaDB(t)
	pid := m.cmd.Process.Pid
	// A warm-up slap, which also sizes the others to the target length at
	// this machine's speed now.
	warm := m.slapRate(t, clients, 4000)
	queries := max(2000, int(warm*target.Seconds()))
	t.Logf("warm-up: %.0f queries/s; each slap runs %d queries", warm, queries)
	var without, with, ratios []float64
	dir := t.TempDir()
	for r := 0; r < rounds; r++ {
		var wo, wi []float64
		for i := 0; i < slaps; i++ {
			wo = append(wo, m.slapRate(t, clients, queries))
		}
		out := filepath.Join(dir, fmt.Sprintf("rec%d", r))
		var mu sync.Mutex
		var reads []rssRead
		stopReads := make(chan struct{})
		readsDone := make(chan struct{})
		go func() {
			defer close(readsDone)
			for {
				if v, ok := smapsRollupRss(pid); ok {
					mu.Lock()
					reads = append(reads, rssRead{time.Now(), v})
					mu.Unlock()
				}
				select {
				case <-stopReads:
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		rc, wait := startRecord(t, fmt.Sprint(pid), "-o", out)
		for i := 0; i < slaps; i++ {
			wi = append(wi, m.slapRate(t, clients, queries))
		}
		rc.Process.Signal(os.Interrupt)
		code, said := wait()
		close(stopReads)
		<-readsDone
		if code != 0 {
			t.Fatalf("arenactl record: exit %d\n%s", code, said)
		}
		if m.exited() || !m.answers() {
			t.Fatalf("mariadbd: exited %v, or does not answer\n%s", m.exited(), m.log())
		}
		without, with = append(without, wo...), append(with, wi...)
		ratio := median(wi) / median(wo)
		ratios = append(ratios, ratio)
		t.Logf("round %d: without %.0f, recorded %.0f queries/s (%.3f)", r, median(wo), median(wi), ratio)
		checkMariaWaterfall(t, out, reads)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range ratios {
		lo, hi = min(lo, r), max(hi, r)
	}
	t.Logf("%d rounds of %d slaps of %d queries, %d clients: median without %.0f, recorded %.0f queries/s: ratio %.3f (rounds from %.3f to %.3f)",
		rounds, slaps, queries, clients, median(without), median(with), median(with)/median(without), lo, hi)
	m.stop()
}

// checkMariaWaterfall: the recording ended interrupted, and at each of its
// intervals the classes add up to its RSS, which is within 1 % of the
// process's as read around when the recording read it.
func checkMariaWaterfall(t *testing.T, path string, reads []rssRead) {
	t.Helper()
	rec, _, err := record.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.End == nil || rec.End.Why != report.EndInterrupted {
		t.Errorf("the recording's end: %+v, want interrupted", rec.End)
	}
	checked, worst := 0, 0.0
	for i := range rec.Intervals {
		iv := &rec.Intervals[i]
		var sum uint64
		for _, c := range iv.Classes {
			sum += c.Rss
		}
		if sum != iv.Rss {
			t.Errorf("interval %d: the classes add up to %d, its RSS is %d", i, sum, iv.Rss)
		}
		// The reads just before and just after the recording's.
		j := sort.Search(len(reads), func(k int) bool { return !reads[k].at.Before(iv.RssAt) })
		if j == 0 || j == len(reads) {
			continue
		}
		a, b := reads[j-1].rss, reads[j].rss
		lo, hi := float64(min(a, b)), float64(max(a, b))
		off := 0.0
		switch v := float64(iv.Rss); {
		case v < lo:
			off = (lo - v) / lo
		case v > hi:
			off = (v - hi) / hi
		}
		worst = max(worst, off)
		if off > 0.01 {
			t.Errorf("interval %d (read at %s): RSS %d, the process's %d and %d around it: %.2f%% off",
				i, iv.RssAt.Format("15:04:05.000"), iv.Rss, a, b, 100*off)
		}
		checked++
	}
	t.Logf("%d intervals, %d checked against the process's RSS: at most %.3f%% off", len(rec.Intervals), checked, 100*worst)
	if checked < len(rec.Intervals)/2 {
		t.Errorf("only %d of %d intervals could be checked", checked, len(rec.Intervals))
	}
}
