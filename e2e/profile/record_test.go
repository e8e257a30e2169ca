package profile

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/testutil"
)

// startRecord starts arenactl record with args and waits until it says
// the sampler's window is open; the returned function waits for it to
// exit and returns its exit code and stderr.
func startRecord(t *testing.T, args ...string) (*exec.Cmd, func() (int, string)) {
	t.Helper()
	cmd := exec.Command(arenactl, append([]string{"record"}, args...)...)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.StartOwned(cmd); err != nil {
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
		t.Fatalf("arenactl record never opened its window: %s", said.String())
	}
	copied := make(chan struct{})
	go func() { io.Copy(&said, stderr); close(copied) }()
	return cmd, func() (int, string) {
		<-copied
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = -int(ws.Signal())
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if s := said.String(); strings.Contains(s, "goroutine ") || strings.Contains(s, "panic:") {
			t.Fatalf("arenactl panicked:\n%s", s)
		}
		return code, said.String()
	}
}

// phaseTruth is one line of record_phases.c's log.
type phaseTruth struct {
	at               time.Time
	phase            int
	heldA, heldB, hC float64
}

func readTruth(t *testing.T, path string) []phaseTruth {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []phaseTruth
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			continue
		}
		var v [5]int64
		for i := range f {
			v[i], _ = strconv.ParseInt(f[i], 10, 64)
		}
		out = append(out, phaseTruth{time.Unix(0, v[0]), int(v[1]), float64(v[2]), float64(v[3]), float64(v[4])})
	}
	return out
}

// heldBy sums what an interval says the stacks through fn hold.
func heldBy(rec *report.Recording, iv *report.RecordedInterval, fn string) (bytes float64) {
	through := map[int]bool{}
	for _, s := range rec.Stacks {
		for _, f := range s.Frames {
			if f.Function == fn {
				through[s.ID] = true
			}
		}
	}
	for _, h := range iv.Held {
		if through[h.Stack] {
			bytes += h.Bytes
		}
	}
	return bytes
}

// sigma is the standard error of the estimate of n blocks of size bytes
// held, sampled at rate: each block is sampled with chance
// p = 1-exp(-size/rate) and then counts size/p (stackprof.Weight).
func heldSigma(held, size, rate float64) float64 {
	p := 1 - math.Exp(-size/rate)
	return math.Sqrt(held / size * size * size * (1 - p) / p)
}

// TestRecordPhasesTruth records record_phases.c, which grows site A,
// then B, maps 16 chunks of their own (site C), frees A (free but
// resident), then trims, logging what each site holds every 20 ms, and exits. At
// every finest interval that ends in a plateau (the truth the same for
// the 400 ms before its end and 50 ms after: the sampler's drains and the read of smaps
// come up to that long apart), the recording's held bytes per site are
// within 4.5 standard errors of the truth (the error of the unbiased
// estimate, from the truth's block counts and the rate): a false failure
// about 1 in 10^5 per check, and the checks of one phase are one
// estimate seen again (the same samples), so about 1 in 10^4 for the
// test. The main heap's RSS is the bytes A and B hold, or held before the
// trim, within 4 MiB over and 1 MiB under; the mmapped chunks' RSS is
// C's. Malloc's split at every walk is the truth's (checkWalks). The
// target's exit ends the recording cleanly (exit 0, the end said
// "exited").
func TestRecordPhasesTruth(t *testing.T) {
	bin := testutil.BuildC(t, "record_phases.c", "-O2", "-g")
	dir := t.TempDir()
	truthPath, out := filepath.Join(dir, "truth"), filepath.Join(dir, "rec")
	cmd := exec.Command(bin, truthPath)
	cmd.Env = append(os.Environ(), "PLATEAU_MS=3000")
	tg := testutil.StartCmd(t, cmd)
	const rate = 128 << 10
	pprofDir := filepath.Join(dir, "pprof")
	os.Mkdir(pprofDir, 0o700)
	_, wait := startRecord(t, fmt.Sprint(tg.Pid), "-o", out, "--interval", "100ms", "--rate", "128K",
		"--pprof-dir", pprofDir, "--pprof-every", "1s", "--trigger-rss", "70M", "--walk-every", "300ms", "--walk-budget", "1,1")
	if a := tg.Send("go"); a != "phases done" {
		t.Fatalf("go: %q", a)
	}
	if code := tg.ExitCode(); code != 0 {
		t.Fatalf("the target exited %d", code)
	}
	code, said := wait()
	if code != 0 {
		t.Fatalf("arenactl record: exit %d\n%s", code, said)
	}
	rec, info, err := record.Read(out)
	if err != nil || info.Cut {
		t.Fatalf("reading the recording: %v (%+v)", err, info)
	}
	if rec.End == nil || rec.End.Why != report.EndExited {
		t.Fatalf("the recording's end: %+v, want exited", rec.End)
	}
	truth := readTruth(t, truthPath)
	checked, rssChecked := map[int]int{}, map[int]int{}
	var peakA float64
	for i := range rec.Intervals {
		iv := &rec.Intervals[i]
		end := iv.End()
		var win []phaseTruth
		for _, l := range truth {
			if l.phase >= 1 && l.phase <= 4 {
				peakA = max(peakA, l.heldA)
			}
			// After the end too: a phase begins up to 20 ms before its
			// first line says so.
			if !l.at.Before(end.Add(-400*time.Millisecond)) && !l.at.After(end.Add(50*time.Millisecond)) {
				win = append(win, l)
			}
		}
		if iv.Merged != 1 || len(win) < 10 {
			continue
		}
		steady := true
		for _, l := range win {
			steady = steady && l == (phaseTruth{l.at, win[0].phase, win[0].heldA, win[0].heldB, win[0].hC})
		}
		if !steady || win[0].phase < 1 || win[0].phase > 5 {
			continue
		}
		tr := win[0]
		checked[tr.phase]++
		for _, s := range []struct {
			fn          string
			truth, size float64
		}{{"site_a", tr.heldA, 64 << 10}, {"site_b", tr.heldB, 48 << 10}, {"site_c", tr.hC, 1 << 20}} {
			got := heldBy(rec, iv, s.fn)
			if sg := heldSigma(s.truth, s.size, rate); math.Abs(got-s.truth) > 4.5*sg+1 {
				t.Errorf("phase %d, interval ending %s: %s holds %.0f bytes, the recording says %.0f (σ %.0f)",
					tr.phase, end.Format("15:04:05.000"), s.fn, s.truth, got, sg)
			}
		}
		// The memory map is read again only when its cost allows
		// (RssAt): checked when that read is in the steady window.
		if iv.RssAt.Before(end.Add(-400 * time.Millisecond)) {
			continue
		}
		rssChecked[tr.phase]++
		heapTruth := tr.heldB
		if tr.phase <= 4 {
			heapTruth += peakA // freed in phase 4, still resident until the trim
		}
		cls := map[string]uint64{}
		for _, c := range iv.Classes {
			cls[c.Class] = c.Rss
		}
		if h := float64(cls["main-heap"]); h < heapTruth-1<<20 || h > heapTruth+4<<20 {
			t.Errorf("phase %d, interval ending %s: the main heap's RSS is %.0f, the program holds (or held, untrimmed) %.0f",
				tr.phase, end.Format("15:04:05.000"), h, heapTruth)
		}
		if m := float64(cls["mmapped-chunks"]); m < tr.hC || m > tr.hC+1<<20 {
			t.Errorf("phase %d, interval ending %s: the mmapped chunks' RSS is %.0f, site C holds %.0f", tr.phase, end.Format("15:04:05.000"), m, tr.hC)
		}
	}
	t.Logf("checked intervals by phase: %v (RSS: %v) of %d", checked, rssChecked, len(rec.Intervals))
	for p := 1; p <= 5; p++ {
		if checked[p] < 2 || rssChecked[p] < 1 {
			t.Errorf("phase %d: %d intervals checked (%d for RSS), want at least 2 (1) (the machine too slow?)", p, checked[p], rssChecked[p])
		}
	}
	checkWalks(t, rec, truth)
	checkTrigger(t, rec)
	checkPprof(t, pprofDir)
	// record show prints it, and the stacks by name.
	r := mustRun(t, "record", "show", out)
	if !strings.Contains(r.Stdout, "ended: exited") || !strings.Contains(r.Stdout, "site_b") {
		t.Errorf("record show:\n%s", r.Stdout)
	}
}

// TestRecordKilled: SIGTERM ends a recording cleanly (exit 0, its end
// said, the sampler taken out); SIGKILL of arenactl in the middle of one
// leaves a file that reads up to its last whole frame, with no end, and
// a target that runs on: the sampler stays in it, inert, as leaks' does,
// and the next arenactl that samples it takes it out (its note says so).
func TestRecordKilled(t *testing.T) {
	bin := testutil.BuildC(t, "record_phases.c", "-O2", "-g")
	dir := t.TempDir()
	out := filepath.Join(dir, "rec")
	cmd := exec.Command(bin, filepath.Join(dir, "truth"), "hold")
	cmd.Env = append(os.Environ(), "PLATEAU_MS=300")
	tg := testutil.StartCmd(t, cmd)
	// SIGTERM first: it ends the recording as Ctrl-C does, cleanly.
	termed := filepath.Join(dir, "termed")
	rc, wait := startRecord(t, fmt.Sprint(tg.Pid), "-o", termed, "--interval", "100ms")
	time.Sleep(500 * time.Millisecond)
	rc.Process.Signal(syscall.SIGTERM)
	if code, said := wait(); code != 0 {
		t.Fatalf("arenactl record ended by SIGTERM: exit %d\n%s", code, said)
	}
	if rec, _, err := record.Read(termed); err != nil || rec.End == nil || rec.End.Why != report.EndInterrupted || rec.End.Left.Addr != 0 {
		t.Fatalf("the recording ended by SIGTERM: %v, end %+v; want interrupted, the sampler removed", err, rec.End)
	}
	mustRun(t, "record", "show", "--json", termed) // the document follows its schema (run)
	rc, wait = startRecord(t, fmt.Sprint(tg.Pid), "-o", out, "--interval", "100ms")
	if a := tg.Send("go"); a != "phases done" {
		t.Fatalf("go: %q", a)
	}
	rc.Process.Kill()
	if code, _ := wait(); code != -int(syscall.SIGKILL) {
		t.Fatalf("arenactl record: exit %d, want killed", code)
	}
	rec, _, err := record.Read(out)
	if err != nil {
		t.Fatalf("the killed recording: %v", err)
	}
	if rec.End != nil || len(rec.Intervals) < 5 {
		t.Errorf("the killed recording: %d intervals, end %+v; want several, no end", len(rec.Intervals), rec.End)
	}
	if r := mustRun(t, "leaks", "--duration", "200ms", "--no-scan", fmt.Sprint(tg.Pid)); !strings.Contains(r.Stderr, "earlier") {
		t.Logf("leaks after the killed recording said: %s", r.Stderr)
	}
	if last, code := tg.Quit(); last != "bye" || code != 0 {
		t.Errorf("the target after arenactl record was killed: %q, exit %d", last, code)
	}
	if show := mustRun(t, "record", "show", out); !strings.Contains(show.Stdout, "not ended cleanly") {
		t.Errorf("record show of a killed recording:\n%s", show.Stdout)
	}
}

// recRSS is a process's resident bytes now (0 when it is gone).
func recRSS(pid int) uint64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// TestRecordBounded records churn.c (one thread allocating and freeing
// without a pause, a block in 16 kept, the oldest kept freed once 16 MiB
// are: a live set that stays flat, as a server's does, so a growth of
// arenactl's would be arenactl's) with tiers that merge within seconds and
// --max-disk 64K: the intervals kept never pass the tiers' bound, the file
// never passes --max-disk by more than a frame (it is compacted,
// atomically: every read of it while it is written succeeds), and
// arenactl's RSS in the second half of the recording is no more than in
// the first half plus 16 MiB. 12 s here (CI); ARENACTL_SOAK=1 records for
// 10 minutes (ARENACTL_SOAK=25m: 25), and then also its last quarter's
// RSS is no more than its second quarter's plus 8 MiB: a plateau.
func TestRecordBounded(t *testing.T) {
	length := 12 * time.Second
	switch v := os.Getenv("ARENACTL_SOAK"); {
	case v == "1":
		length = 10 * time.Minute
	case v != "":
		if d, err := time.ParseDuration(v); err == nil {
			length = d
		}
	}
	soak := length > time.Minute
	churn := exec.Command("nice", "-n", "10", testutil.BuildC(t, "churn.c", "-O2"), "1")
	churn.Env = append(os.Environ(), "CHURN_LEAK_CAP=16777216")
	tg := testutil.StartCmd(t, churn)
	out := filepath.Join(t.TempDir(), "rec")
	const tiers = "100ms:2s,500ms:6s,1s*5"
	const maxDisk = 64 << 10
	rc, wait := startRecord(t, fmt.Sprint(tg.Pid), "-o", out, "--interval", "100ms", "--tiers", tiers, "--max-disk", "64K",
		"--duration", length.String(), "--max-stacks", "20")
	begin := time.Now()
	var firstHalf, secondHalf uint64
	var quarters [4]uint64 // the most RSS in each quarter of the recording
	var biggest int64
	reads := 0
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
			rss := recRSS(rc.Process.Pid)
			q := min(int(time.Since(begin)*4/length), 3)
			quarters[q] = max(quarters[q], rss)
			if time.Since(begin) < length/2 {
				firstHalf = max(firstHalf, rss)
			} else {
				secondHalf = max(secondHalf, rss)
			}
			if fi, err := os.Stat(out); err == nil {
				biggest = max(biggest, fi.Size())
			}
			if reads%8 == 0 {
				if _, _, err := record.Read(out); err != nil {
					t.Errorf("reading the recording while it is written: %v", err)
				}
			}
			reads++
		}
	}()
	code, said := wait()
	close(done)
	if code != 0 {
		t.Fatalf("arenactl record: exit %d\n%s", code, said)
	}
	rec, _, err := record.Read(out)
	if err != nil || rec.End == nil || rec.End.Why != report.EndDuration {
		t.Fatalf("the recording: %v, end %+v", err, rec.End)
	}
	parsed, _ := record.ParseTiers(tiers)
	bound := record.MaxIntervals(parsed)
	merged := 0
	for i, iv := range rec.Intervals {
		merged = max(merged, iv.Merged)
		if i > 0 && !iv.Start.Equal(rec.Intervals[i-1].End()) {
			t.Errorf("interval %d starts at %v, the one before ends at %v", i, iv.Start, rec.Intervals[i-1].End())
		}
	}
	t.Logf("%d intervals kept (bound %d, the most merged into one %d), %d samples; the file at most %d bytes; arenactl's RSS at most %d MiB in the first half, %d MiB in the second",
		len(rec.Intervals), bound, merged, rec.Intervals[len(rec.Intervals)-1].Samples, biggest, firstHalf>>20, secondHalf>>20)
	if len(rec.Intervals) > bound || merged < 5 {
		t.Errorf("%d intervals kept, the tiers' bound %d; the most merged %d, want merges", len(rec.Intervals), bound, merged)
	}
	if biggest > maxDisk+16<<10 {
		t.Errorf("the file grew to %d bytes, over --max-disk %d and a frame", biggest, maxDisk)
	}
	if firstHalf == 0 || secondHalf > firstHalf+16<<20 {
		t.Errorf("arenactl's RSS grew from at most %d MiB in the first half to %d MiB in the second", firstHalf>>20, secondHalf>>20)
	}
	t.Logf("arenactl's RSS at most, by quarter: %d, %d, %d, %d MiB", quarters[0]>>20, quarters[1]>>20, quarters[2]>>20, quarters[3]>>20)
	if soak && quarters[3] > quarters[1]+8<<20 {
		t.Errorf("arenactl's RSS grew from at most %d MiB in the second quarter to %d MiB in the last: no plateau", quarters[1]>>20, quarters[3]>>20)
	}
	tg.Quit()
}

// checkTrigger: --trigger-rss 70M fired once (in phase 2, the cooldown
// keeping it from firing again), and its snapshot is a zstd-compressed
// core, said in the recording.
func checkTrigger(t *testing.T, rec *report.Recording) {
	t.Helper()
	var triggers, snaps int
	for _, e := range rec.Events {
		switch e.Kind {
		case report.EventTrigger:
			triggers++
			if e.Limit != 70<<20 || e.Value < e.Limit {
				t.Errorf("trigger: %+v", e)
			}
		case report.EventSnapshot:
			snaps++
			b := make([]byte, 4)
			f, err := os.Open(e.Path)
			if err == nil {
				_, err = io.ReadFull(f, b)
				f.Close()
			}
			if err != nil || string(b) != "\x28\xb5\x2f\xfd" {
				t.Errorf("the snapshot %s: %v, begins %x", e.Path, err, b)
			}
		case report.EventSnapshotFailed:
			t.Errorf("the trigger's snapshot failed: %s", e.Text)
		}
	}
	if triggers != 1 || snaps != 1 {
		t.Errorf("%d triggers and %d snapshots, want 1 of each: %+v", triggers, snaps, rec.Events)
	}
}

// checkPprof: --pprof-dir has a profile a second, each of what is held;
// go tool pprof -diff_base of the first of phase 2 against the last
// shows what site_b added (pprof's own reader, which -diff_base uses).
func checkPprof(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) < 5 {
		t.Fatalf("--pprof-dir holds %d files (%v), want one a second", len(ents), err)
	}
	first, last := filepath.Join(dir, ents[0].Name()), filepath.Join(dir, ents[len(ents)-1].Name())
	r, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-diff_base", first, last).CombinedOutput()
	if err != nil || !strings.Contains(string(r), "site_b") {
		t.Errorf("go tool pprof -diff_base %s %s: %v\n%s", first, last, err, r)
	}
}

// TestRecordTriggerCgroup: --trigger-cgroup fires when the process's
// memory cgroup (v2, or v1) charges past it: one snapshot, said in the recording with
// the cgroup's figure, while the recording goes on.
func TestRecordTriggerCgroup(t *testing.T) {
	cg := testutil.MemoryCgroup(t)
	bin := testutil.BuildC(t, "record_phases.c", "-O2", "-g")
	dir := t.TempDir()
	out := filepath.Join(dir, "rec")
	cmd := exec.Command(bin, filepath.Join(dir, "truth"), "hold")
	cmd.Env = append(os.Environ(), "PLATEAU_MS=300")
	tg := testutil.StartCmd(t, cmd)
	cg.Add(t, tg.Pid)
	rc, wait := startRecord(t, fmt.Sprint(tg.Pid), "-o", out, "--interval", "100ms", "--trigger-cgroup", "60M")
	if a := tg.Send("go"); a != "phases done" {
		t.Fatalf("go: %q", a)
	}
	var snap *report.RecordingEvent
	for deadline := time.Now().Add(60 * time.Second); snap == nil && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		rec, _, err := record.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range rec.Events {
			if e.Kind == report.EventSnapshot || e.Kind == report.EventSnapshotFailed {
				snap = &rec.Events[i]
			}
		}
	}
	rc.Process.Signal(syscall.SIGINT)
	if code, said := wait(); code != 0 {
		t.Fatalf("arenactl record: exit %d\n%s", code, said)
	}
	if snap == nil || snap.Kind != report.EventSnapshot {
		t.Fatalf("no snapshot written: %+v", snap)
	}
	rec, _, _ := record.Read(out)
	triggers := 0
	for _, e := range rec.Events {
		if e.Kind == report.EventTrigger {
			triggers++
			if !strings.Contains(e.Text, "cgroup") || e.Value < 60<<20 {
				t.Errorf("the trigger: %+v", e)
			}
		}
	}
	if triggers != 1 {
		t.Errorf("%d triggers, want 1 (the cooldown)", triggers)
	}
	if last, code := tg.Quit(); last != "bye" || code != 0 {
		t.Errorf("the target: %q, exit %d", last, code)
	}
}

// TestRecordRefusals: record writes a new file and never replaces or
// follows one; each refusal is one line and exit 2 before anything is
// done to the process (which does not exist here: a refusal let through
// would say so, exit 3). record show refuses what is not a recording
// with exit 12.
func TestRecordRefusals(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	os.WriteFile(existing, []byte("keep me"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(filepath.Join(dir, "nowhere"), link)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"record", "-o", existing, "99999999"}, exitUsage, "never replaces"},
		{[]string{"record", "-o", link, "99999999"}, exitUsage, "never replaces"},
		{[]string{"record", "-o", filepath.Join(dir, "no", "rec"), "99999999"}, exitUsage, "no directory"},
		{[]string{"record", "99999999"}, exitUsage, "-o FILE"},
		{[]string{"record", "--tiers", "1s", "-o", filepath.Join(dir, "r"), "99999999"}, exitUsage, "--tiers"},
		{[]string{"record", "-o", filepath.Join(dir, "r"), "99999999"}, exitNoProcess, ""},
		{[]string{"record", "show", existing}, exitBadCore, "not an arenactl recording"},
		{[]string{"record", "show", link}, exitBadCore, "symbolic link"},
	} {
		r := run(t, c.args...)
		if r.Code != c.code || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, c.says) {
			t.Errorf("arenactl %s: exit %d, %q; want exit %d saying %q", strings.Join(c.args, " "), r.Code, r.Stderr, c.code, c.says)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Errorf("the existing file was changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
		t.Error("the link was followed")
	}
	if _, err := os.Lstat(filepath.Join(dir, "r")); err == nil {
		t.Error("a recording that never began left its file")
	}
}
