package sampler_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

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
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
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
			if r.Kind != "free" && (r.Addr == 0 || r.Size == 0 || len(r.Stack) == 0 || r.PC == 0) {
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
// blob/sampler.c with this machine's gcc and binutils.
func TestBlobIsBuiltFromSource(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("sh", "blob/gen.sh", dir).CombinedOutput()
	if err != nil {
		t.Skipf("blob/gen.sh: %v\n%s", err, out)
	}
	for _, f := range []string{"sampler.bin", "symbols.go"} {
		want, _ := os.ReadFile(filepath.Join(dir, f))
		got, _ := os.ReadFile(f)
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what blob/gen.sh builds from blob/sampler.c: run go generate ./internal/sampler", f)
		}
	}
}
