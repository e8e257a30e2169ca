package walk

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// heapviewsTruth is what testdata/heapviews.c says of itself.
type heapviewsTruth struct {
	big, bigSize uint64    // the mmapped chunk's user pointer and chunk size
	al, alSize   uint64    // the same of the memalign'd one
	re, reSize   uint64    // the same of the memalign'd one grown by realloc
	lost, lostSz uint64    // the same of the one no pointer is kept to
	nmmaps, mmb  uint64    // malloc's own count of mmapped chunks, and their bytes
	minor        int       // the glibc it runs: 2.minor
	merged       [2]uint64 // the one mapping holding the chunk and the memory mapped below it
	blocks       []uint64  // each worker's block
}

// heapviewsRun is heapviews.c under the system's glibc or one of the
// trees.
type heapviewsRun struct {
	name  string
	start func(t *testing.T, args ...string) *testutil.Target
}

func heapviewsRuns(t *testing.T) []heapviewsRun {
	runs := []heapviewsRun{{"system", func(t *testing.T, args ...string) *testutil.Target {
		return testutil.Start(t, testutil.BuildC(t, "heapviews.c"), args...)
	}}}
	for _, g := range testutil.GlibcTrees(t) {
		runs = append(runs, heapviewsRun{g.Version, func(t *testing.T, args ...string) *testutil.Target {
			return testutil.StartCmd(t, g.Command(testutil.BuildC(t, "heapviews.c", testutil.GlibcSysroot(t)...), args...))
		}})
	}
	return runs
}

// startHeapviews starts heapviews.c as r does, with args (the KiB it maps
// below its chunks), and asks for its truth.
func startHeapviews(t *testing.T, r heapviewsRun, args ...string) (*testutil.Target, heapviewsTruth) {
	t.Helper()
	tg := r.start(t, args...)
	var tr heapviewsTruth
	hex := func(s string) uint64 {
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		if err != nil {
			t.Fatalf("heapviews said %q", s)
		}
		return v
	}
	for line := tg.Send("truth"); line != "end"; line = tg.Next() {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "mmapped":
			tr.big = hex(f[1])
			tr.bigSize, _ = strconv.ParseUint(f[2], 10, 64)
		case len(f) == 3 && f[0] == "aligned":
			tr.al = hex(f[1])
			tr.alSize, _ = strconv.ParseUint(f[2], 10, 64)
		case len(f) == 3 && f[0] == "realigned":
			tr.re = hex(f[1])
			tr.reSize, _ = strconv.ParseUint(f[2], 10, 64)
		case len(f) == 3 && f[0] == "leaked":
			tr.lost = hex(f[1])
			tr.lostSz, _ = strconv.ParseUint(f[2], 10, 64)
		case len(f) == 3 && f[0] == "nmmaps":
			tr.nmmaps, _ = strconv.ParseUint(f[1], 10, 64)
			tr.mmb, _ = strconv.ParseUint(f[2], 10, 64)
		case len(f) == 2 && f[0] == "glibc":
			_, err := fmt.Sscanf(f[1], "2.%d", &tr.minor)
			if err != nil {
				t.Fatalf("heapviews said %q", line)
			}
		case len(f) == 3 && f[0] == "merged":
			tr.merged = [2]uint64{hex(f[1]), hex(f[2])}
		case len(f) == 3 && f[0] == "notmerged":
			t.Fatalf("the kernel did not merge the chunk's mapping with the one below it (%s): the case under test is not made", line)
		case len(f) == 3 && f[0] == "thread":
			tr.blocks = append(tr.blocks, hex(f[2]))
		default:
			t.Fatalf("heapviews said %q", line)
		}
	}
	if tr.big == 0 || tr.al == 0 || tr.lost == 0 || tr.re == 0 || tr.nmmaps != 4 || tr.merged[0] == 0 || tr.merged[0] == tr.big-16 || len(tr.blocks) != 4 {
		t.Fatalf("heapviews told %+v", tr)
	}
	return tg, tr
}

// gcoreOf writes gdb's gcore of pid; "" when gdb is not installed.
func gcoreOf(t *testing.T, pid int) string {
	t.Helper()
	if _, err := exec.LookPath("gcore"); err != nil {
		t.Log("no gcore (gdb): the kernel-format core is not checked")
		return ""
	}
	prefix := filepath.Join(t.TempDir(), "gcore")
	if b, err := exec.Command("gcore", "-o", prefix, fmt.Sprint(pid)).CombinedOutput(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, b)
	}
	return fmt.Sprintf("%s.%d", prefix, pid)
}

type heapviewsHeap struct {
	Classes []struct {
		Class string `json:"class"`
		Count uint64 `json:"count"`
		Bytes uint64 `json:"bytes"`
	} `json:"classes"`
	Lookups []struct {
		Addr  uint64 `json:"addr"`
		Found bool   `json:"found"`
		Chunk uint64 `json:"chunk"`
		Size  uint64 `json:"size"`
		Class string `json:"class"`
	} `json:"lookups"`
	Scan struct {
		Unread uint64 `json:"unread_root_bytes"`
	} `json:"scan"`
}

func heapJSON(t *testing.T, args ...string) heapviewsHeap {
	t.Helper()
	var h heapviewsHeap
	out := mustRun(t, append([]string{"heap", "--json"}, args...)...).Stdout
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return h
}

// Chunks glibc mmapped of their own, in a mapping the kernel merged with
// memory the program mapped itself right below them (so no chunk is at the
// mapping's start), are found by every view: the read-only walk counts as
// many mmapped chunks of as many bytes as malloc's own counters, live, from
// a snapshot and from gdb's gcore; heap --addr finds each chunk, one
// memalign moved into its region included (by its own header, also after
// a realloc grew it), reachable
// from static data, or leaked where the program kept no pointer to it. The
// same with 40 MiB below them, a mapping big enough for an image to leave
// out (its middle: the chunks, near its end, stay in the image either way;
// LeaveOut's own test puts one in the middle). Under the system's glibc and
// every tree's.
func TestMmappedChunkInMergedMapping(t *testing.T) {
	for _, r := range heapviewsRuns(t) {
		for _, kib := range []string{"256", "40960"} {
			t.Run(r.name+"/"+kib+"KiB", func(t *testing.T) {
				tg, tr := startHeapviews(t, r, kib)
				checkMmappedViews(t, tg, tr)
				if line, code := tg.Quit(); line != "bye" || code != 0 {
					t.Fatalf("target: %q %d", line, code)
				}
			})
		}
	}
}

func checkMmappedViews(t *testing.T, tg *testutil.Target, tr heapviewsTruth) {
	t.Helper()
	pid := fmt.Sprint(tg.Pid)
	snap := filepath.Join(t.TempDir(), "heapviews.core")
	mustRun(t, "snapshot", "-o", snap, pid)
	views := []string{pid, snap}
	if g := gcoreOf(t, tg.Pid); g != "" {
		views = append(views, g)
	}
	type want struct {
		user, size uint64
		class      string
	}
	wants := []want{{tr.big, tr.bigSize, "static"}, {tr.al, tr.alSize, "static"}, {tr.re, tr.reSize, "static"}, {tr.lost, tr.lostSz, "leaked"}}
	for _, v := range views {
		args := []string{v}
		if v == pid {
			args = []string{"--read-only", pid}
		}
		var info struct {
			ReadOnly struct {
				Mmapped struct {
					Count uint64 `json:"count"`
					Bytes uint64 `json:"bytes"`
				} `json:"mmapped"`
			} `json:"read_only"`
		}
		out := mustRun(t, append([]string{"info", "--json"}, args...)...).Stdout
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		mmb := tr.mmb
		if tr.minor >= 43 {
			// 2.43's mremap_chunk counts 16 bytes too many in
			// mp_.mmapped_mem (new_size - size - offset, its size short
			// of the region's tail); heapviews' realloc is one.
			mmb -= 16
		}
		if mm := info.ReadOnly.Mmapped; mm.Count != tr.nmmaps || mm.Bytes != mmb {
			t.Errorf("%s: the walk found %d mmapped chunks of %d bytes; malloc counts %d of %d bytes", v, mm.Count, mm.Bytes, tr.nmmaps, mmb)
		}
		args = []string{v}
		for _, w := range wants {
			args = append(args, "--addr", fmt.Sprintf("%#x", w.user), "--addr", fmt.Sprintf("%#x", w.user+w.size/2))
		}
		h := heapJSON(t, args...)
		if len(h.Lookups) != 2*len(wants) {
			t.Fatalf("%s: %d lookups", v, len(h.Lookups))
		}
		for i, l := range h.Lookups {
			w := wants[i/2]
			if !l.Found || l.Chunk != w.user || l.Size != w.size || l.Class != w.class {
				t.Errorf("%s: --addr %#x found %+v; want the %d-byte chunk at %#x, %s", v, l.Addr, l, w.size, w.user, w.class)
			}
		}
	}
}

// Every view of a four-thread process gives the same classes: the chunks
// reached only from a thread's static TLS (each worker's tcache, reached
// through glibc's tcache variable in libc's TLS block, inside the thread's
// stack mapping) are static live, in a snapshot, in a full snapshot and in
// gdb's gcore read with and without libc's file, not stack; and no view
// leaves more roots unread than the live one, which leaves none. Under the
// system's glibc and every tree's.
func TestClassesAlikeInEveryView(t *testing.T) {
	for _, r := range heapviewsRuns(t) {
		t.Run(r.name, func(t *testing.T) { classesAlike(t, r) })
	}
}

func classesAlike(t *testing.T, r heapviewsRun) {
	tg, tr := startHeapviews(t, r)
	pid := fmt.Sprint(tg.Pid)
	dir := t.TempDir()
	snap, full := filepath.Join(dir, "snap.core"), filepath.Join(dir, "full.core")
	mustRun(t, "snapshot", "-o", snap, pid)
	mustRun(t, "snapshot", "--full", "-o", full, pid)
	views := [][]string{{pid}, {snap}, {full}}
	if g := gcoreOf(t, tg.Pid); g != "" {
		views = append(views, []string{g})
		if tr.minor < 43 {
			views = append(views, []string{"--no-libc-file", g})
		} else {
			// Memory alone does not tell 2.43's allocator yet (its mp_
			// is not found): a matter of its own.
			t.Log("glibc 2.43: the gcore is not read without libc's file")
		}
	}
	var want heapviewsHeap
	for i, v := range views {
		args := append([]string(nil), v...)
		for _, b := range tr.blocks {
			args = append(args, "--addr", fmt.Sprintf("%#x", b))
		}
		h := heapJSON(t, args...)
		for _, l := range h.Lookups {
			if !l.Found || l.Class != "static" {
				t.Errorf("%v: a worker's block at %#x, kept in its thread variable: %+v", v, l.Addr, l)
			}
		}
		if i == 0 {
			want = h
			// Live, nothing is unread but guard pages glibc 2.42 and
			// later put inside a thread's stack mapping, below its TLS.
			if tr.minor < 42 && h.Scan.Unread != 0 {
				t.Errorf("live: %d root bytes unread", h.Scan.Unread)
			}
			for _, c := range h.Classes {
				if c.Class == "leaked" && (c.Count != 1 || c.Bytes != tr.lostSz) || c.Class != "static" && c.Class != "leaked" && c.Count != 0 {
					t.Errorf("live: %d chunks %s; every chunk of heapviews is reachable from static data or TLS, but the one it lost", c.Count, c.Class)
				}
			}
			continue
		}
		if strings.HasPrefix(filepath.Base(v[len(v)-1]), "gcore") && tr.minor >= 42 && !reflect.DeepEqual(h.Classes, want.Classes) {
			// gdb's gcore holds the workers' thread control blocks as
			// zeros where their stack mappings hold glibc's guard pages
			// (2.42 and later; it writes its guard pages as zeros too):
			// what only they reach may differ, but never unsaid.
			t.Logf("%v: %d root bytes unread (live %d); classes %+v", v, h.Scan.Unread, want.Scan.Unread, h.Classes)
			if h.Scan.Unread == 0 {
				t.Errorf("%v: classes %+v, live %+v, and no root unread", v, h.Classes, want.Classes)
			}
			continue
		}
		if !reflect.DeepEqual(h.Classes, want.Classes) {
			t.Errorf("%v: classes %+v; live %+v", v, h.Classes, want.Classes)
		}
		if h.Scan.Unread != want.Scan.Unread {
			t.Errorf("%v: %d root bytes unread; live %d", v, h.Scan.Unread, want.Scan.Unread)
		}
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}
