package sampler_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// bindNow builds a target whose GOT is bound at start: the tests that
// compare GOT entries before and after need values the dynamic linker does
// not change meanwhile (lazy binding writes an entry at its first call).
// TestLazyBindingRestored covers lazy entries.
const bindNow = "-Wl,-z,now"

func words(t *testing.T, pid int, addrs []uint64) []uint64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make([]uint64, len(addrs))
	var b [8]byte
	for i, a := range addrs {
		if _, err := f.ReadAt(b[:], int64(a)); err != nil {
			t.Fatal(err)
		}
		out[i] = binary.LittleEndian.Uint64(b[:])
	}
	return out
}

// Attach, sample a churning target, detach: records come, every GOT entry
// holds its original bytes again, the sampler is gone, and the target
// finds its heap intact.
func TestAttachSampleDetach(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2", bindNow))
	lt, err := live.Open(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Close()
	slots := sampler.GotSlots(module.NewTable(lt))
	if len(slots) == 0 {
		t.Fatal("no GOT entries for the malloc family")
	}
	before := words(t, tg.Pid, slots)
	s, err := sampler.Attach(context.Background(), lt, sampler.Options{Rate: 64 << 10, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d GOT entries patched, skipped %v, stopped %v", len(s.Patches), s.Skipped, s.Stopped)
	kinds := map[string]int{}
	var n int
	for i := 0; i < 10; i++ {
		time.Sleep(100 * time.Millisecond)
		recs, st, err := s.Drain()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			kinds[r.Kind]++
			if r.Kind != "free" && (r.Addr == 0 || r.Size == 0 || len(r.Stack) == 0 || r.Regs.PCOf(arch.Host()) == 0) {
				t.Errorf("record %+v", r)
				break
			}
		}
		n += len(recs)
		_ = st
	}
	if n == 0 || kinds["malloc"] == 0 || kinds["free"] == 0 {
		t.Errorf("records by kind: %v", kinds)
	}
	t.Logf("%d records: %v", n, kinds)
	left, err := s.Detach(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if left.Addr != 0 || len(left.Changed) != 0 {
		t.Errorf("left: %+v", left)
	}
	if after := words(t, tg.Pid, slots); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("GOT entries before %x, after %x", before, after)
	}
	maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.Pid))
	if strings.Contains(string(maps), fmt.Sprintf("%x-", s.Base())) {
		t.Errorf("the sampler is still mapped at %#x", s.Base())
	}
	if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
		t.Fatalf("target: %q", a)
	}
	if line, code := tg.Quit(); !strings.HasPrefix(line, "ok ") || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// The checked-in image and offsets are what blob/gen.sh makes of
// blob/sampler.c with this machine's gcc and binutils, for x86_64 and
// for aarch64.
func TestBlobIsBuiltFromSource(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("sh", "blob/gen.sh", dir).CombinedOutput()
	if err != nil {
		t.Skipf("blob/gen.sh: %v\n%s", err, out)
	}
	for _, f := range []string{"sampler.bin", "symbols_amd64.go", "sampler_arm64.bin", "symbols_arm64.go"} {
		want, _ := os.ReadFile(filepath.Join(dir, f))
		got, _ := os.ReadFile(f)
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what blob/gen.sh builds from blob/sampler.c: run go generate ./internal/sampler", f)
		}
	}
}

// profile attaches to the target, drains for d (rescanning for new objects
// every 100 ms), detaches, and returns the records.
func profile(t *testing.T, lt *live.Target, o sampler.Options, d time.Duration, during func()) ([]sampler.Record, *sampler.Sampler, sampler.Left) {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Second
	}
	s, err := sampler.Attach(context.Background(), lt, o)
	if err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during()
	}
	var out []sampler.Record
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		if err := s.Rescan(context.Background()); err != nil {
			t.Fatal(err)
		}
		recs, _, err := s.Drain()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	left, err := s.Detach(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out, s, left
}

func openTarget(t *testing.T, pid int) *live.Target {
	t.Helper()
	lt, err := live.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lt.Close() })
	return lt
}

func mustCheck(t *testing.T, tg *testutil.Target) {
	t.Helper()
	if a := tg.Send("check"); !strings.HasPrefix(a, "ok ") {
		t.Fatalf("target: %q", a)
	}
}

// Under full RELRO the GOT is read-only: it is rewritten all the same,
// and put back.
func TestFullRELRO(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2", "-Wl,-z,relro,-z,now"))
	lt := openTarget(t, tg.Pid)
	slots := sampler.GotSlots(module.NewTable(lt))
	before := words(t, tg.Pid, slots)
	recs, s, left := profile(t, lt, sampler.Options{Rate: 64 << 10}, 500*time.Millisecond, nil)
	if len(recs) == 0 || len(s.Patches) == 0 {
		t.Fatalf("%d records, %d patches", len(recs), len(s.Patches))
	}
	if left.Addr != 0 {
		t.Errorf("left: %+v", left)
	}
	if after := words(t, tg.Pid, slots); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("GOT entries before %x, after %x", before, after)
	}
	mustCheck(t, tg)
}

// A library dlopen'd while the process is profiled is sampled from then on.
func TestDlopenWhileProfiled(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2", "-ldl"))
	lib := testutil.BuildC(t, "libleak.c", "-O2", "-shared", "-fPIC")
	lt := openTarget(t, tg.Pid)
	recs, s, _ := profile(t, lt, sampler.Options{Rate: 16 << 10}, time.Second, func() {
		if a := tg.Send("load " + lib); a != "loaded" {
			t.Fatalf("load: %q", a)
		}
	})
	if err := lt.Refresh(); err != nil {
		t.Fatal(err)
	}
	mods := module.NewTable(lt)
	fromLib := 0
	for _, r := range recs {
		if m, ok := mods.Lookup(r.Regs.PCOf(arch.Host())); ok && strings.HasSuffix(m.Path, "/libleak") {
			fromLib++
			if r.Size != 8000 {
				t.Errorf("a record from the library: %+v", r)
			}
		}
	}
	if fromLib == 0 {
		t.Errorf("no sample from the dlopen'd library among %d; patched %+v", len(recs), s.Patches)
	}
	mustCheck(t, tg)
}

// fork and exec while profiled: the children run (and their allocations
// go to their own copy of the ring), the parent's sampling goes on.
func TestForkExecWhileProfiled(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
	lt := openTarget(t, tg.Pid)
	recs, _, left := profile(t, lt, sampler.Options{Rate: 64 << 10}, 600*time.Millisecond, func() {
		for _, cmd := range []string{"fork", "exec", "fork"} {
			if a := tg.Send(cmd); !strings.HasSuffix(a, " 0") {
				t.Fatalf("%s: %q", cmd, a)
			}
		}
	})
	if len(recs) == 0 || left.Addr != 0 {
		t.Errorf("%d records, left %+v", len(recs), left)
	}
	for _, r := range recs {
		if r.Tid == 0 && r.Kind != "free" {
			t.Errorf("record without a thread: %+v", r)
		}
	}
	mustCheck(t, tg)
}

// A free is never lost, though the allocations' rings overflow: with
// rings of 16 and no drain for a while, allocations are shortened and
// dropped, yet once
// churn.c frees every block it keeps, the only sampled blocks the records
// leave held are leak_site's (1000 bytes). A lost free would leave a
// freed block held: a leak that is not there.
func TestFreesNeverLost(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
	lt := openTarget(t, tg.Pid)
	s, err := sampler.Attach(context.Background(), lt, sampler.Options{Rate: 16 << 10, RingSlots: 16, ShortSlots: 16, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var recs []sampler.Record
	var st sampler.Stats
	drain := func() {
		r, s, err := s.Drain()
		if err != nil {
			t.Fatal(err)
		}
		recs, st = append(recs, r...), s
	}
	for i := 0; i < 10; i++ {
		time.Sleep(50 * time.Millisecond)
		drain()
	}
	time.Sleep(300 * time.Millisecond) // the ring stays full
	if a := tg.Send("drop"); a != "dropped" {
		t.Fatalf("drop: %q", a)
	}
	drain()
	if _, err := s.Detach(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st.Dropped == 0 {
		t.Fatal("no allocation was dropped: the rings never filled")
	}
	slices.SortStableFunc(recs, func(a, b sampler.Record) int { return cmp.Compare(a.Stamp, b.Stamp) })
	held := map[uint64]sampler.Record{}
	frees := 0
	for _, r := range recs {
		switch {
		case r.Kind == "free":
			frees++
			delete(held, r.Addr)
		case !r.Untracked:
			held[r.Addr] = r
		}
	}
	t.Logf("%d records (%d frees), %d allocations dropped, %d shortened, %d untracked, %d held", len(recs), frees, st.Dropped, st.Shortened, st.Untracked, len(held))
	for _, r := range held {
		if r.Size != 1000 {
			t.Errorf("a sampled %s of %d bytes at %#x was freed, but its free never came", r.Kind, r.Size, r.Addr)
		}
	}
	if st.Untracked != 0 {
		t.Errorf("%d sampled blocks untracked or their frees lost", st.Untracked)
	}
	mustCheck(t, tg)
}

// A sampler left by a killed arenactl is removed by the next one, which
// finds the GOT entries as they were.
func TestLeftoverRemoved(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2", bindNow))
	lt := openTarget(t, tg.Pid)
	slots := sampler.GotSlots(module.NewTable(lt))
	before := words(t, tg.Pid, slots)
	s, err := sampler.Attach(context.Background(), lt, sampler.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sampler.Attach(context.Background(), lt, sampler.Options{Timeout: 3 * time.Second}); err == nil {
		t.Fatal("a second sampler attached while the first one's arenactl runs")
	}
	if err := s.Orphan(); err != nil {
		t.Fatal(err)
	}
	if err := lt.Refresh(); err != nil {
		t.Fatal(err)
	}
	recs, s2, _ := profile(t, lt, sampler.Options{Rate: 64 << 10}, 300*time.Millisecond, nil)
	if len(s2.Notes) != 1 || !strings.Contains(s2.Notes[0], "GOT entries restored") || len(recs) == 0 {
		t.Errorf("notes %q, %d records", s2.Notes, len(recs))
	}
	if after := words(t, tg.Pid, slots); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("GOT entries before %x, after %x", before, after)
	}
	mustCheck(t, tg)
}

// cycles is how many attach/detach cycles TestAttachDetachCycles makes;
// ARENACTL_SAMPLER_CYCLES sets it (200 for the long form).
func cycles() int { return testutil.Rounds("ARENACTL_SAMPLER_CYCLES", 20) }

// Attach and detach again and again while threads hammer malloc and check
// their blocks.
func TestAttachDetachCycles(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2", bindNow), "4")
	lt := openTarget(t, tg.Pid)
	slots := sampler.GotSlots(module.NewTable(lt))
	before := words(t, tg.Pid, slots)
	kept := 0
	for i := 0; i < cycles(); i++ {
		_, _, left := profile(t, lt, sampler.Options{Rate: 32 << 10}, 20*time.Millisecond, nil)
		if left.Addr != 0 {
			kept++
			t.Logf("cycle %d: kept %+v", i, left)
		}
		if err := lt.Refresh(); err != nil {
			t.Fatal(err)
		}
	}
	if after := words(t, tg.Pid, slots); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("GOT entries before %x, after %x", before, after)
	}
	mustCheck(t, tg)
	t.Logf("%d cycles, %d samplers kept", cycles(), kept)
}

// Threads created while the process is profiled (live_target.c's spawner
// makes short-lived ones that allocate) are sampled with the others: the
// per-thread counters hang off the thread pointer, not the target's TLS.
func TestThreadsCreatedWhileProfiled(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "live_target.c"), "spawn")
	lt := openTarget(t, tg.Pid)
	before := map[int]bool{}
	for _, tid := range tg.Threads() {
		before[tid] = true
	}
	recs, _, left := profile(t, lt, sampler.Options{Rate: 4 << 10}, time.Second, nil)
	fresh := 0
	for _, r := range recs {
		if !before[r.Tid] {
			fresh++
		}
	}
	if fresh == 0 || left.Addr != 0 {
		t.Errorf("%d of %d samples from threads created meanwhile; left %+v", fresh, len(recs), left)
	}
	if a := tg.Send("round"); a != "ok" {
		t.Fatalf("round: %q", a)
	}
}

// Lazily bound entries hold their PLT stub until the first call: one the
// sampler replaced goes back to the stub (or, once called again after the
// detach, to the function the dynamic linker binds it to), never elsewhere.
func TestLazyBindingRestored(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2", "-Wl,-z,lazy"))
	lt := openTarget(t, tg.Pid)
	_, s, _ := profile(t, lt, sampler.Options{Rate: 64 << 10}, 300*time.Millisecond, nil)
	real := map[string]uint64{}
	for _, name := range []string{"malloc", "calloc", "realloc", "posix_memalign", "free"} {
		real[name] = s.Real(name)
	}
	for _, p := range s.Patches {
		now := words(t, tg.Pid, []uint64{p.Slot})[0]
		if now != p.Orig && now != real[p.Name] {
			t.Errorf("%s's GOT entry for %s at %#x holds %#x: neither what it held (%#x) nor libc's %#x", p.Module, p.Name, p.Slot, now, p.Orig, real[p.Name])
		}
	}
	mustCheck(t, tg)
}

// Every hook's jump on to the real function becomes a direct jump when the
// function is within 2 GiB, and stays indirect when not.
func TestDirectJumps(t *testing.T) {
	if n := sampler.DirectJumps(0x7f0000000000, 0x7f0010000000); n != 10 {
		t.Errorf("%d of 10 hooks jump directly", n)
	}
	if n := sampler.DirectJumps(0x7f0000000000, 0x100000); n != 0 {
		t.Errorf("%d hooks jump directly to a function out of reach", n)
	}
}
