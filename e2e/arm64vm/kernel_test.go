package arm64vm

import (
	"os"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// kernel: what growth and leaks need of the guest's kernel, apart from
// arenactl: a software perf event (page faults) on a process, an eBPF
// program loaded, and a uprobe on libc's malloc attached. A failure here
// is the machine's, not arenactl's.
func (g *guest) kernel(t *testing.T) {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS, Sample: 1,
		Sample_type: unix.PERF_SAMPLE_REGS_USER | unix.PERF_SAMPLE_STACK_USER, Sample_stack_user: 4096, Sample_regs_user: 1}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, os.Getpid(), -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		t.Errorf("perf_event_open(page faults, user registers and stack): %v", err)
	} else {
		unix.Close(fd)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Kprobe, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatalf("loading an eBPF program: %v", err)
	}
	defer prog.Close()
	ex, err := link.OpenExecutable("/usr/lib/aarch64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	up, err := ex.Uprobe("malloc", prog, nil)
	if err != nil {
		t.Fatalf("a uprobe on libc's malloc: %v", err)
	}
	up.Close()
}
