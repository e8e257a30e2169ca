package live_test

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/live"
)

// i386Pause is a whole 32-bit x86 program: one loadable segment whose code
// loops on pause(2) through int 0x80.
func i386Pause() []byte {
	const base, hdrs = 0x08048000, 52 + 32
	code := []byte{0xb8, 29, 0, 0, 0, 0xcd, 0x80, 0xeb, 0xf7} // mov eax, 29 (pause); int 0x80; jmp back
	le := binary.LittleEndian
	b := make([]byte, hdrs, hdrs+len(code))
	copy(b, "\x7fELF\x01\x01\x01")
	le.PutUint16(b[16:], 2) // ET_EXEC
	le.PutUint16(b[18:], 3) // EM_386
	le.PutUint32(b[20:], 1) // EV_CURRENT
	le.PutUint32(b[24:], base+hdrs)
	le.PutUint32(b[28:], 52) // e_phoff
	le.PutUint16(b[40:], 52) // e_ehsize
	le.PutUint16(b[42:], 32) // e_phentsize
	le.PutUint16(b[44:], 1)  // e_phnum
	ph := b[52:]
	le.PutUint32(ph[0:], 1) // PT_LOAD
	le.PutUint32(ph[8:], base)
	le.PutUint32(ph[12:], base)
	le.PutUint32(ph[16:], uint32(hdrs+len(code)))
	le.PutUint32(ph[20:], uint32(hdrs+len(code)))
	le.PutUint32(ph[24:], 5) // PF_R|PF_X
	le.PutUint32(ph[28:], 0x1000)
	return append(b, code...)
}

// A 32-bit process is refused in one line, as an architecture arenactl
// does not read (cmd/arenactl's exit 18), before anything is stopped.
func TestOpenRefuses32Bit(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "pause32")
	if err := os.WriteFile(exe, i386Pause(), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	if err := cmd.Start(); err != nil {
		t.Skipf("this kernel runs no 32-bit x86 program (IA32_EMULATION): %v", err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	time.Sleep(50 * time.Millisecond)
	for _, open := range []func(int) (*live.Target, error){live.Open, live.OpenReadOnly} {
		tg, err := open(cmd.Process.Pid)
		if err == nil {
			tg.Close()
			t.Fatal("a 32-bit process was opened")
		}
		if !errors.Is(err, errkind.ErrArch) || !strings.Contains(err.Error(), "32-bit i386") || strings.Contains(err.Error(), "\n") {
			t.Errorf("open: %v; want one line, an errkind.ErrArch naming a 32-bit i386 program", err)
		}
	}
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if f := strings.Fields(string(st)); len(f) > 2 && f[2] == "t" {
		t.Error("the refused process was left stopped")
	}
}

// A live process's page size is the kernel's (AT_PAGESZ), here the host's.
func TestPageSizeFromAuxv(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	tg, err := live.OpenObserved(cmd.Process.Pid)
	if err != nil {
		t.Skip(err)
	}
	defer tg.Close()
	if ps := tg.PageSize(); ps != uint64(os.Getpagesize()) {
		t.Errorf("page size %d, want %d", ps, os.Getpagesize())
	}
}
