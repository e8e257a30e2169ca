package perf_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSampleRegsARM64UnderQemu runs the aarch64 build's decoding test
// (regs_arm64_test.go) under qemu-user, so that CI, which has no aarch64
// machine, runs it rather than only compiling it. Skipped without
// qemu-aarch64-static or the go command.
func TestSampleRegsARM64UnderQemu(t *testing.T) {
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		t.Skip("no qemu-aarch64-static (Debian: qemu-user-static) to run aarch64 code with")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the aarch64 test with")
	}
	bin := filepath.Join(t.TempDir(), "perf.test")
	build := exec.Command(goCmd, "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the aarch64 test: %v\n%s", err, out)
	}
	out, err := exec.Command(qemu, bin, "-test.run", "^TestSampleRegsARM64$", "-test.v").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSampleRegsARM64") {
		t.Fatalf("the aarch64 decoding under qemu-user: %v\n%s", err, out)
	}
}
