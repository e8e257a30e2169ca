package module_test

import (
	"debug/elf"
	"os/exec"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
)

// Every mapping of one load of a file gives the same load bias: the text,
// the first page with the headers, and the data, split by mprotect where
// RELRO ends (a mapping that starts inside its segment, not on its first
// page). Checked on every file a running sleep(1) maps: libc, ld.so and
// sleep itself.
func TestLoadBiasIsOnePerLoad(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to run: %v", err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var ms []maps.Mapping
	// ld.so maps the libraries after exec: wait until libc is there.
	for i := 0; i < 200; i++ {
		var err error
		if ms, err = maps.Read(cmd.Process.Pid, false); err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 && hasLibc(ms) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	files := 0
	biases := map[string]uint64{}
	for _, m := range ms {
		if m.Path == "" || m.Path[0] != '/' || m.Inode == 0 {
			continue
		}
		ef, err := elf.Open(m.Path)
		if err != nil {
			continue
		}
		bias, ok := module.LoadBias(ef, m)
		ef.Close()
		if !ok {
			t.Errorf("%s at %#x (offset %#x): no segment found", m.Path, m.Start, m.Offset)
			continue
		}
		if b, seen := biases[m.Path]; !seen {
			biases[m.Path] = bias
			files++
		} else if b != bias {
			t.Errorf("%s at %#x (offset %#x): bias %#x, its other mappings %#x", m.Path, m.Start, m.Offset, bias, b)
		}
	}
	if files < 3 {
		t.Errorf("%d files mapped, want sleep, libc and ld.so: %v", files, biases)
	}
}

func hasLibc(ms []maps.Mapping) bool {
	for _, m := range ms {
		if m.Executable() && len(m.Path) > 8 && m.Path[len(m.Path)-9:] == "libc.so.6" {
			return true
		}
	}
	return false
}
