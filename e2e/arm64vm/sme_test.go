package arm64vm

import (
	"strconv"
	"strings"
	"testing"
)

// sme: a thread of testdata/sme.c in SME streaming mode with ZA on
// (checking SVCR on every turn of a user-code loop) is passed over by
// info --thread, with its reason, since the call's frame has no SME
// record; info borrows the main thread, and the SME thread finds its
// state whole.
func (g *guest) sme(t *testing.T) {
	if !strings.Contains(readFile(t, "/proc/cpuinfo"), " sme") {
		t.Skip("the CPU has no SME")
	}
	tg := g.start(t, "sme")
	pid := strconv.Itoa(tg.Pid)
	var other int
	for _, tid := range tg.Threads() {
		if tid != tg.Pid {
			other = tid
		}
	}
	r := g.run(t, "info", "--timeout", "2s", "--thread", strconv.Itoa(other), pid)
	if r.code == 0 || !strings.Contains(r.stderr, "SME") {
		t.Errorf("info of the SME thread: exit %d, %q; want it refused for its SME state", r.code, r.stderr)
	}
	g.mustRun(t, "info", pid)
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %q", a)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}
