package inject

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// watching is a running arenactl watch whose output is read line by line.
type watching struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr bytes.Buffer
	rest   strings.Builder // stdout not read by next
}

func startWatch(t *testing.T, args ...string) *watching {
	t.Helper()
	w := &watching{cmd: exec.Command(arenactl, append([]string{"watch"}, args...)...)}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Stderr = &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cmd.Process.Kill(); w.cmd.Wait() })
	w.lines = bufio.NewScanner(out)
	w.lines.Buffer(make([]byte, 1<<20), 16<<20)
	return w
}

// next returns the next line of output; false at its end.
func (w *watching) next() (string, bool) {
	if !w.lines.Scan() {
		return "", false
	}
	return w.lines.Text(), true
}

// nextSample skips to the next line of a text watch that shows a sample
// (it starts with the time).
func (w *watching) nextSample(t *testing.T) string {
	t.Helper()
	for {
		l, ok := w.next()
		if !ok {
			t.Fatalf("watch ended before a sample line; stderr: %s", w.stderr.String())
		}
		if len(l) > 8 && l[2] == ':' && l[5] == ':' {
			return l
		}
	}
}

// wait reads the rest of the output and returns the exit code.
func (w *watching) wait(t *testing.T) int {
	t.Helper()
	for {
		l, ok := w.next()
		if !ok {
			break
		}
		w.rest.WriteString(l + "\n")
	}
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(testutil.Patience):
		t.Fatal("watch did not exit")
	}
	return -1
}

// Each line of watch --json is the info --json document of a sample, with
// its time and index; a target grown between two samples shows it in the
// second: RSS, the arena heaps' RSS, and its arena.
func TestWatchJSONLines(t *testing.T) {
	tg := startGrow(t)
	const mib = 16
	w := startWatch(t, "--json", "--interval", "1s", "--count", "3", fmt.Sprint(tg.Pid))
	var samples []jsonWatchSample
	var grown []time.Time // when each growth was complete
	for {
		l, ok := w.next()
		if !ok {
			break
		}
		var info jsonInfo
		if err := decodeDoc([]byte(l), &info); err != nil || len(info.Arenas) == 0 || info.Pid != tg.Pid {
			t.Fatalf("line %d is not an info document of %d: %v\n%s", len(samples), tg.Pid, err, l)
		}
		testutil.ValidateJSON(t, "watch", []byte(l)) // every name is info's, or time and sample
		var s jsonWatchSample
		if err := decodeDoc([]byte(l), &s); err != nil {
			t.Fatalf("line %d: %v\n%s", len(samples), err, l)
		}
		samples = append(samples, s)
		if len(samples) < 3 {
			mustGrow(t, tg, fmt.Sprintf("grow %d", mib))
			grown = append(grown, time.Now())
		}
	}
	if code := w.wait(t); code != 0 {
		t.Fatalf("watch: exit %d; stderr: %s", code, w.stderr.String())
	}
	if len(samples) != 3 {
		t.Fatalf("%d samples, want 3", len(samples))
	}
	for i, s := range samples {
		if s.Sample != i+1 { // from 1, as the text counts (issue 22, item 8)
			t.Errorf("line %d has sample %d", i, s.Sample)
		}
		if s.ReadOnly == nil || s.ReadOnly.Torn || s.Injection != nil {
			t.Errorf("sample %d is not a frozen read-only report", i)
		}
		if len(s.Arenas) != 2 || s.Arenas[1].Walk == nil {
			t.Fatalf("sample %d: %d arenas, want main and the worker's, walked", i, len(s.Arenas))
		}
	}
	for i := 1; i < 3; i++ {
		at, err := time.Parse(time.RFC3339Nano, samples[i].Time)
		if err != nil {
			t.Fatal(err)
		}
		if !at.After(grown[i-1]) {
			// The test cannot judge then: a skip, not a failure (it
			// failed so once in a run of the whole, heavier suite).
			t.Skipf("sample %d began at %s, before the growth ended (%s): the machine is too slow for this test",
				i, at.Format(time.StampMicro), grown[i-1].Format(time.StampMicro))
		}
		prev, cur := &samples[i-1].JSONInfo, &samples[i].JSONInfo
		for _, m := range []struct {
			what       string
			before, at uint64
		}{
			{"RSS", prev.Maps.Process.Rss, cur.Maps.Process.Rss},
			{"arena-heap RSS", classRss(prev, "arena-heap"), classRss(cur, "arena-heap")},
			{"the worker's arena in use", prev.Arenas[1].InUseBytes, cur.Arenas[1].InUseBytes},
		} {
			if grew := int64(m.at) - int64(m.before); grew < mib<<20*95/100 {
				t.Errorf("sample %d: %s grew by %d bytes after growing %d MiB", i, m.what, grew, mib)
			}
		}
	}
	mustQuit(t, tg)
}

func classRss(j *jsonInfo, class string) uint64 {
	for _, c := range j.Maps.Classes {
		if c.Class == class {
			return c.Rss
		}
	}
	return 0
}

// Ctrl-C is how a watch ends: it prints its summary and exits 0, having
// held nothing, at whichever moment of a sample or a pause it comes.
func TestWatchInterrupted(t *testing.T) {
	tg := startGrow(t)
	// A sample line is printed at the end of its sample; the next begins
	// 200ms after that one began: the later delays fall into it.
	for _, delay := range []time.Duration{0, 160 * time.Millisecond, 175 * time.Millisecond, 190 * time.Millisecond, 205 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			w := startWatch(t, "--interval", "200ms", "--min-change", "1048576", fmt.Sprint(tg.Pid))
			w.nextSample(t)
			mustGrow(t, tg, "grow 4")
			w.nextSample(t)
			time.Sleep(delay) // into the next sample's freeze, or its pause
			w.cmd.Process.Signal(syscall.SIGINT)
			if code := w.wait(t); code != 0 {
				t.Fatalf("watch after SIGINT: exit %d, want 0; stderr: %s", code, w.stderr.String())
			}
			out := w.rest.String()
			for _, want := range []string{"summary of ", "RSS trend ", "from the first sample to the last:", "arena-heap"} {
				if !strings.Contains(out, want) {
					t.Errorf("the summary lacks %q:\n%s", want, out)
				}
			}
			if w.stderr.Len() != 0 {
				t.Errorf("stderr: %s", w.stderr.String())
			}
			untouched(t, tg) // untraced, running, its blocks intact
		})
	}
	mustQuit(t, tg)
}

// A watched process that exits ends the watch with one line and exit 10,
// after the summary of what was seen.
func TestWatchTargetExits(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			tg := startGrow(t)
			args := []string{"--interval", "100ms", fmt.Sprint(tg.Pid)}
			if asJSON {
				args = append([]string{"--json"}, args...)
			}
			w := startWatch(t, args...)
			if asJSON {
				w.next()
			} else {
				w.nextSample(t)
			}
			mustQuit(t, tg)
			code := w.wait(t)
			r := result{Stdout: w.rest.String(), Stderr: w.stderr.String(), Code: code}
			if r.Code != exitGone {
				t.Fatalf("exit %d, want %d; stderr: %s", r.Code, exitGone, r.Stderr)
			}
			if n := strings.Count(strings.TrimSpace(r.Stderr), "\n"); n != 0 || !strings.HasPrefix(r.Stderr, "arenactl: ") {
				t.Errorf("want one line starting with 'arenactl: ', got %q", r.Stderr)
			}
			for _, want := range []string{fmt.Sprintf("process %d exited after", tg.Pid), "target exited"} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("message %q lacks %q", r.Stderr, want)
				}
			}
			if asJSON && strings.Contains(r.Stdout, "summary") || !asJSON && !strings.Contains(r.Stdout, "summary of ") {
				t.Errorf("stdout after the first sample:\n%s", r.Stdout)
			}
		})
	}
}

func TestWatchUsage(t *testing.T) {
	expectRefusal(t, run(t, "watch"), exitUsage, "one process id")
	expectRefusal(t, run(t, "watch", "--interval", "0s", "1"), exitUsage, "--interval")
	expectRefusal(t, run(t, "watch", "--count", "-1", "1"), exitUsage, "--count")
	expectRefusal(t, run(t, "watch", "--thread", "5", "1"), exitUsage, "--inject")
	expectRefusal(t, run(t, "watch", "--inject", "--no-freeze", "1"), exitUsage, "--no-freeze")
	expectRefusal(t, run(t, "watch", "99999999"), exitNoProcess, "process 99999999", "no such process")
}
