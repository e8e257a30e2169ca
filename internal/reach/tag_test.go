package reach

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/chunks"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/testutil"
)

// tagged is a target whose every word that points into [lo, hi) reads with
// a memory tag in its top byte, as an aarch64 process's pointers into a
// heap of glibc's malloc with glibc.mem.tagging do, and whose machine is m.
type tagged struct {
	debuggee.Target
	lo, hi uint64
	m      *arch.Arch
}

func (t *tagged) Arch() *arch.Arch { return t.m }

func (t *tagged) ReadAt(p []byte, addr uint64) (int, error) {
	n, err := t.Target.ReadAt(p, addr)
	for i := (8 - addr%8) % 8; i+8 <= uint64(n); i += 8 {
		if v := binary.LittleEndian.Uint64(p[i:]); v >= t.lo && v < t.hi {
			binary.LittleEndian.PutUint64(p[i:], v|0x0b<<56)
		}
	}
	return n, err
}

// On aarch64 a tagged pointer still reaches its block (the scan strips the
// top byte); on x86_64 the same words are not pointers, and what only they
// reached is leaked: the stripping is what makes the classes agree.
func TestScanStripsMemoryTags(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-*.core.zst"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no core fixtures: %v", err)
	}
	h, ix := openIndexed(t, paths[0])
	roots := Roots(h.T, ix, 0)
	plain, err := Scan(context.Background(), h.T, ix, roots, nil)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := ix.Bounds()
	for _, c := range []struct {
		m    *arch.Arch
		same bool
	}{{arch.ARM64, true}, {arch.AMD64, false}} {
		for _, jobs := range []int{1, 2} {
			tt := &tagged{Target: h.T, lo: lo, hi: hi, m: c.m}
			res, err := ScanJobs(context.Background(), jobs, tt, ix, roots, nil)
			if err != nil {
				t.Fatal(err)
			}
			differ := 0
			ix.ForEach(func(ch chunks.Chunk) bool {
				if res.Class(ch) != plain.Class(ch) {
					differ++
				}
				return true
			})
			if c.same && differ != 0 {
				t.Errorf("%s, %d jobs: %d chunks classed otherwise when their pointers carry tags", c.m, jobs, differ)
			}
			if !c.same && differ == 0 {
				t.Errorf("%s, %d jobs: tagged words were taken for pointers on a machine without tags", c.m, jobs)
			}
		}
	}
}
