package site_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/arch/site"
	"github.com/arenactl/arenactl/internal/maps"
)

// The checked-in images, offsets and layout constants are what gen.sh
// makes of the sources with this machine's assemblers. An architecture
// whose cross assembler is missing is skipped, saying which package has it.
func TestCodeIsBuiltFromSource(t *testing.T) {
	for _, c := range []struct{ arch, cc, pkg string }{
		{"amd64", "gcc", "gcc, binutils"},
		{"arm64", "aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu, binutils-aarch64-linux-gnu"},
	} {
		t.Run(c.arch, func(t *testing.T) {
			if _, err := os.Stat("site_" + c.arch + ".S"); err != nil {
				t.Skipf("no site_%s.S yet", c.arch)
			}
			if _, err := exec.LookPath(c.cc); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s is not installed (Debian: apt-get install %s); CI checks every image", c.cc, c.pkg)
				}
				t.Skipf("%s is not installed (Debian: apt-get install %s): the %s image is not checked", c.cc, c.pkg, c.arch)
			}
			dir := t.TempDir()
			cmd := exec.Command("sh", "gen.sh", dir)
			cmd.Env = append(os.Environ(), "ARCHES="+c.arch)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("gen.sh: %v\n%s", err, out)
			}
			for _, f := range []string{c.arch + ".bin", c.arch + "_code.go", "layout.go"} {
				want, _ := os.ReadFile(filepath.Join(dir, f))
				got, _ := os.ReadFile(f)
				if !bytes.Equal(got, want) {
					t.Errorf("%s is not what gen.sh builds from its source: run go generate ./internal/arch/site", f)
				}
			}
		})
	}
}

// What the routines pass to the kernel's PROCMAP_QUERY is what
// internal/maps, which asks it too, says the ioctl is.
func TestLayoutAgreesWithMaps(t *testing.T) {
	if site.ProcmapQuery != maps.QueryIoctl || site.QueryAddrOff != maps.QueryAddrOff ||
		site.QueryStartOff != maps.QueryStartOff || site.QueryEndOff != maps.QueryEndOff {
		t.Error("site.h's PROCMAP_QUERY constants differ from internal/maps'")
	}
	if site.LeaveEntries-site.LeaveQuery < maps.QuerySize {
		t.Error("struct procmap_query does not fit before the entries")
	}
	for _, c := range []*site.Code{site.AMD64, site.ARM64} {
		if len(c.Text) > site.XsaveOff-site.CodeOff {
			t.Errorf("%s: %d bytes of code do not fit the code page", c.Arch, len(c.Text))
		}
		if !(c.Restore < c.Image && c.Image <= c.Raw && c.Raw < c.Lock && c.Lock < c.LockWait && c.LockWait < c.LockEnd && c.LockEnd <= uint64(len(c.Text))) {
			t.Errorf("%s: routines out of order: %+v", c.Arch, *c)
		}
	}
}

// The aarch64 routines that run as functions (raw, lock) do what
// site_amd64.S's do, run by qemu-user: a program built for aarch64 maps a
// site, copies arm64.bin into it and calls them. Skipped without the
// cross compiler or qemu-user-static.
func TestRoutinesRunARM64(t *testing.T) {
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		t.Skip("no qemu-aarch64-static (Debian: qemu-user-static) to run aarch64 code with")
	}
	if _, err := exec.LookPath("aarch64-linux-gnu-gcc"); err != nil {
		t.Skip("no aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu) to build the runner with")
	}
	bin := filepath.Join(t.TempDir(), "run")
	if out, err := exec.Command("aarch64-linux-gnu-gcc", "-static", "-O1", "-Wall", "-Werror", "-o", bin, "testdata/run.c").CombinedOutput(); err != nil {
		t.Skipf("building the aarch64 runner: %v\n%s", err, out)
	}
	c := site.ARM64
	hex := func(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }
	out, err := exec.Command(qemu, bin, "arm64.bin", hex(c.Raw), hex(c.Lock), hex(c.LockWait), hex(c.Restore)).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("the aarch64 routines under qemu-user: %v\n%s", err, out)
	}
}
