package main

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
	nmmaps, mmb  uint64    // malloc's own count of mmapped chunks, and their bytes
	merged       [2]uint64 // the one mapping holding the chunk and the memory mapped below it
	blocks       []uint64  // each worker's block
}

func startHeapviews(t *testing.T) (*testutil.Target, heapviewsTruth) {
	t.Helper()
	tg := testutil.Start(t, testutil.BuildC(t, "heapviews.c"))
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
		case len(f) == 3 && f[0] == "nmmaps":
			tr.nmmaps, _ = strconv.ParseUint(f[1], 10, 64)
			tr.mmb, _ = strconv.ParseUint(f[2], 10, 64)
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
	if tr.big == 0 || tr.al == 0 || tr.nmmaps != 2 || tr.merged[0] == 0 || tr.merged[0] == tr.big-16 || len(tr.blocks) != 4 {
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
	out := mustRun(t, append([]string{"heap", "--json"}, args...)...).stdout
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return h
}

// A chunk glibc mmapped of its own, in a mapping the kernel merged with
// memory the program mapped itself right below it (so the chunk is not at
// the mapping's start), is found by every view: the read-only walk counts
// as many mmapped chunks as malloc's own counter, live, from a snapshot and
// from gdb's gcore; heap --addr finds the chunk, reachable from static
// data, in all three.
func TestMmappedChunkInMergedMapping(t *testing.T) {
	tg, tr := startHeapviews(t)
	pid := fmt.Sprint(tg.Pid)
	snap := filepath.Join(t.TempDir(), "heapviews.core")
	mustRun(t, "snapshot", "-o", snap, pid)
	views := []string{pid, snap}
	if g := gcoreOf(t, tg.Pid); g != "" {
		views = append(views, g)
	}
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
		out := mustRun(t, append([]string{"info", "--json"}, args...)...).stdout
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if mm := info.ReadOnly.Mmapped; mm.Count != tr.nmmaps || mm.Bytes != tr.mmb {
			t.Errorf("%s: the walk found %d mmapped chunks of %d bytes; malloc counts %d of %d bytes", v, mm.Count, mm.Bytes, tr.nmmaps, tr.mmb)
		}
		h := heapJSON(t, v, "--addr", fmt.Sprintf("%#x", tr.big), "--addr", fmt.Sprintf("%#x", tr.big+tr.bigSize/2),
			"--addr", fmt.Sprintf("%#x", tr.al), "--addr", fmt.Sprintf("%#x", tr.al+tr.alSize/2))
		for i, l := range h.Lookups {
			user, size := tr.big, tr.bigSize
			if i >= 2 {
				user, size = tr.al, tr.alSize
			}
			if !l.Found || l.Chunk != user || l.Size != size || l.Class != "static" {
				t.Errorf("%s: --addr %#x found %+v; want the %d-byte chunk at %#x, static", v, l.Addr, l, size, user)
			}
		}
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

// Every view of a four-thread process gives the same classes: the chunks
// reached only from a thread's static TLS (each worker's tcache, reached
// through glibc's tcache variable in libc's TLS block, inside the thread's
// stack mapping) are static live, in a snapshot, in a full snapshot and in
// gdb's gcore read without libc's file, not stack; and no root goes
// unread.
func TestClassesAlikeInEveryView(t *testing.T) {
	tg, tr := startHeapviews(t)
	pid := fmt.Sprint(tg.Pid)
	dir := t.TempDir()
	snap, full := filepath.Join(dir, "snap.core"), filepath.Join(dir, "full.core")
	mustRun(t, "snapshot", "-o", snap, pid)
	mustRun(t, "snapshot", "--full", "-o", full, pid)
	views := [][]string{{pid}, {snap}, {full}}
	if g := gcoreOf(t, tg.Pid); g != "" {
		views = append(views, []string{"--no-libc-file", g}, []string{g})
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
		if h.Scan.Unread != 0 {
			t.Errorf("%v: %d root bytes unread", v, h.Scan.Unread)
		}
		if i == 0 {
			want = h
			for _, c := range h.Classes {
				if c.Class != "static" && c.Count != 0 {
					t.Errorf("live: %d chunks %s; every chunk of heapviews is reachable from static data or TLS", c.Count, c.Class)
				}
			}
			continue
		}
		if !reflect.DeepEqual(h.Classes, want.Classes) {
			t.Errorf("%v: classes %+v; live %+v", v, h.Classes, want.Classes)
		}
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}
