package arch_test

import (
	"bufio"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
)

func TestHost(t *testing.T) {
	a := arch.Host()
	if a == nil || a.Name != runtime.GOARCH {
		t.Fatalf("Host() = %v on %s", a, runtime.GOARCH)
	}
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := arch.ForELF(f.Class, f.Machine)
	if err != nil || b != a {
		t.Errorf("ForELF(own executable) = %v, %v; want %v", b, err, a)
	}
	hdr := make([]byte, 64)
	r, _ := os.Open("/proc/self/exe")
	defer r.Close()
	r.ReadAt(hdr, 0)
	if c, ok, err := arch.FromHeader(hdr); !ok || err != nil || c != a {
		t.Errorf("FromHeader(own executable) = %v, %v, %v", c, ok, err)
	}
}

// A 32-bit or foreign program is refused, with a line that says what it is.
func TestFromHeaderRefuses(t *testing.T) {
	hdr := func(class elf.Class, m elf.Machine) []byte {
		b := make([]byte, 64)
		copy(b, elf.ELFMAG)
		b[elf.EI_CLASS], b[elf.EI_DATA] = byte(class), byte(elf.ELFDATA2LSB)
		b[18], b[19] = byte(m), byte(m>>8)
		return b
	}
	for _, c := range []struct {
		class elf.Class
		m     elf.Machine
		want  *arch.Arch
		line  string
	}{
		{elf.ELFCLASS64, elf.EM_X86_64, arch.AMD64, ""},
		{elf.ELFCLASS64, elf.EM_AARCH64, arch.ARM64, ""},
		{elf.ELFCLASS32, elf.EM_386, nil, "a 32-bit i386 program"},
		{elf.ELFCLASS32, elf.EM_X86_64, nil, "a 32-bit x86_64 program"}, // x32
		{elf.ELFCLASS32, elf.EM_ARM, nil, "a 32-bit arm program"},
		{elf.ELFCLASS64, elf.EM_RISCV, nil, "another architecture (EM_RISCV)"},
	} {
		a, ok, err := arch.FromHeader(hdr(c.class, c.m))
		if !ok || a != c.want {
			t.Errorf("%v %v: %v, %v, %v", c.class, c.m, a, ok, err)
		}
		var ue *arch.UnsupportedError
		if c.want == nil && (!errors.As(err, &ue) || !strings.Contains(err.Error(), c.line) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("%v %v: error %q, want one line with %q", c.class, c.m, err, c.line)
		}
	}
	if _, ok, _ := arch.FromHeader([]byte("#!/bin/sh\n echo not an ELF file")); ok {
		t.Error("a script was taken for an ELF header")
	}
}

func TestPageSizeFromAuxv(t *testing.T) {
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		t.Fatal(err)
	}
	got, ok := arch.Host().PageSizeFromAuxv(auxv)
	if !ok || got != uint64(os.Getpagesize()) {
		t.Errorf("AT_PAGESZ %d, %v; want %d", got, ok, os.Getpagesize())
	}
	// A 64 KiB aarch64 kernel's vector; an implausible size is refused.
	vec := func(ps uint64) []byte {
		var b []byte
		for _, w := range []uint64{33, 0x7fff0000, 6, ps, 0, 0} {
			b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(w>>24), byte(w>>32), byte(w>>40), byte(w>>48), byte(w>>56))
		}
		return b
	}
	if got, ok := arch.ARM64.PageSizeFromAuxv(vec(65536)); !ok || got != 65536 {
		t.Errorf("arm64 64 KiB: %d, %v", got, ok)
	}
	if _, ok := arch.AMD64.PageSizeFromAuxv(vec(65536)); ok {
		t.Error("x86_64 took a 64 KiB page")
	}
	if _, ok := arch.ARM64.PageSizeFromAuxv(vec(12345)); ok {
		t.Error("an implausible page size was taken")
	}
}

// The syscall tables agree with golang.org/x/sys/unix's, which are
// generated from the kernel's headers for each architecture.
func TestSyscallsMatchXSys(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Skipf("go list golang.org/x/sys: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	for _, a := range []*arch.Arch{arch.AMD64, arch.ARM64} {
		f, err := os.Open(filepath.Join(dir, "unix", "zsysnum_linux_"+a.Name+".go"))
		if err != nil {
			t.Skipf("x/sys's table: %v", err)
		}
		want := map[string]int{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			w := strings.Fields(sc.Text())
			if len(w) == 3 && w[1] == "=" && strings.HasPrefix(w[0], "SYS_") {
				n, err := strconv.Atoi(w[2])
				if err == nil {
					want[strings.ToLower(strings.TrimPrefix(w[0], "SYS_"))] = n
				}
			}
		}
		f.Close()
		for _, name := range []string{"read", "poll", "open", "pause", "epoll_wait", "select", "mmap", "munmap",
			"mremap", "brk", "madvise", "mprotect", "rt_sigreturn", "rt_sigprocmask", "clone", "exit",
			"exit_group", "prctl", "openat", "ioctl", "close", "futex", "ppoll", "restart_syscall", "wait4",
			"pselect6", "epoll_pwait", "io_uring_enter", "epoll_pwait2", "accept4", "recvmmsg"} {
			got, ok := a.Sys(name)
			w, wok := want[name]
			if ok != wok || got != w {
				t.Errorf("%s %s: %d, %v; x/sys says %d, %v", a, name, got, ok, w, wok)
			}
		}
	}
}

// The register file names the registers every layer asks for, and
// NT_PRSTATUS and perf decode into the DWARF numbers.
func TestRegisterFile(t *testing.T) {
	for _, a := range []*arch.Arch{arch.AMD64, arch.ARM64} {
		rf := a.Regs
		for what, n := range map[string]int{"pc": rf.PC, "sp": rf.SP, "fp": rf.FP, "ra": rf.RA, "tp": rf.TP} {
			if n < 0 || n >= rf.Count || n >= arch.MaxRegs || rf.Names[n] == "" {
				t.Errorf("%s: %s is DWARF %d, unnamed or out of range", a, what, n)
			}
		}
		if len(a.Prstatus.Words)*8+a.Prstatus.RegsOff+8 != a.Prstatus.Size {
			t.Errorf("%s: pr_reg of %d words at %d does not end 8 bytes before the %d-byte prstatus", a, len(a.Prstatus.Words), a.Prstatus.RegsOff, a.Prstatus.Size)
		}
		words := make([]uint64, len(a.Prstatus.Words))
		for i := range words {
			words[i] = uint64(1000 + i)
		}
		r := a.FromPrstatus(words)
		for i, n := range a.Prstatus.Words {
			if v, ok := r.Get(n); n >= 0 && (!ok || v != uint64(1000+i)) {
				t.Errorf("%s: pr_reg word %d is not DWARF %d", a, i, n)
			}
		}
		for _, n := range []int{rf.PC, rf.SP, rf.FP, rf.RA} {
			if _, ok := r.Get(n); !ok {
				t.Errorf("%s: NT_PRSTATUS does not give DWARF %s", a, rf.Names[n])
			}
			found := false
			for _, p := range a.Perf.Order {
				found = found || p == n
			}
			if !found {
				t.Errorf("%s: the perf mask does not ask for %s", a, rf.Names[n])
			}
		}
		bits := 0
		for m := a.Perf.Mask; m != 0; m &= m - 1 {
			bits++
		}
		if bits != len(a.Perf.Order) {
			t.Errorf("%s: %d mask bits, %d dumped registers", a, bits, len(a.Perf.Order))
		}
	}
	// What perf dumps on x86_64, in the order internal/perf took it before
	// the mask moved here: rbx, rbp, rsp, rip, r12..r15.
	want := []int{arch.AMD64RBX, arch.AMD64RBP, arch.AMD64RSP, arch.AMD64RIP, arch.AMD64R12, arch.AMD64R13, arch.AMD64R14, arch.AMD64R15}
	if a := arch.AMD64; len(a.Perf.Order) != len(want) || a.Perf.Mask != 0xf001c2 {
		t.Errorf("x86_64 perf: mask %#x order %v", a.Perf.Mask, a.Perf.Order)
	} else {
		for i := range want {
			if a.Perf.Order[i] != want[i] {
				t.Errorf("x86_64 perf: order %v, want %v", a.Perf.Order, want)
			}
		}
	}
}

func TestStrip(t *testing.T) {
	const p = 0x0000ffff8a2b3c40
	tagged := uint64(0x0b)<<56 | p
	pac := uint64(0x0037)<<48 | 0x0000aaaab0c01234
	if got := arch.ARM64.StripTag(tagged); got != p {
		t.Errorf("arm64 StripTag(%#x) = %#x", tagged, got)
	}
	if got := arch.ARM64.StripCode(pac); got != 0x0000aaaab0c01234 {
		t.Errorf("arm64 StripCode(%#x) = %#x", pac, got)
	}
	// x86_64 has neither: a pointer with high bits set stays what it is
	// (a non-canonical value is garbage there).
	if arch.AMD64.StripTag(tagged) != tagged || arch.AMD64.StripCode(pac) != pac || arch.AMD64.TagsPointers() {
		t.Error("x86_64 changed a pointer")
	}
}
