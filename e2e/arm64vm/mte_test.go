package arm64vm

import (
	"strconv"
	"strings"
	"testing"
)

// mte: a target that tags its own memory (testdata/mtetag.c: a PROT_MTE
// page with a random tag, synchronous tag checks on) keeps pointers to
// its chunks with tag bits 56-59 set, in a global and in the tagged page.
// heap must find the chunks those tagged pointers reach (static, not
// leaked) and the one nothing reaches (leaked), and reading the tagged page (the scan, the
// injected malloc_info's call site) must not fault the target: after info
// and heap the target reads its tagged page through its tagged pointer
// and exits clean. Runs only on a CPU with MTE: the VM booted with
// ARENACTL_ARM64_MACHINE=virt,mte=on (docs/arm64.md).
func (g *guest) mte(t *testing.T) {
	if !strings.Contains(readFile(t, "/proc/cpuinfo"), " mte") {
		t.Skip("the CPU has no MTE (boot with ARENACTL_ARM64_MACHINE=virt,mte=on)")
	}
	tg := g.start(t, "mtetag")
	pid := strconv.Itoa(tg.Pid)
	want := map[string]string{}
	for line := tg.Send("truth"); line != "end"; line = tg.Next() {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("mtetag said %q", line)
		}
		if f[0] == "region" {
			// An anonymous mapping is memory malloc does not own: a
			// root, so what it reaches is static.
			f[0] = "static"
		}
		if f[0] == "leaked-hidden" {
			// The target never prints the leaked chunk's address
			// itself: printf's dead stack slots would hold it.
			v, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
			if err != nil {
				t.Fatalf("mtetag said %q", line)
			}
			f[0], f[1] = "leaked", "0x"+strconv.FormatUint(v^0xffff000000000000, 16)
		}
		want[f[1]] = f[0]
	}
	g.mustRun(t, "info", pid)
	args := []string{"heap"}
	for a := range want {
		args = append(args, "--addr", a)
	}
	out := g.mustRun(t, append(args, pid)...).stdout
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if m := lookupLine.FindStringSubmatch(l); m != nil {
			got[m[1]] = m[4]
		}
	}
	for a, class := range want {
		if got[a] != class {
			t.Errorf("the chunk at %s is %s, arenactl says %q", a, class, got[a])
		}
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %q", a)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d, stderr %q", line, code, tg.Stderr())
	}
	if t.Failed() {
		t.Logf("arenactl heap:\n%s", out)
	}
}
