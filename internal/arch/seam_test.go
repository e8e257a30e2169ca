package arch_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The machine's registers are named only where the machine is known: in
// this package's per-machine files (amd64*.go, arm64*.go) and in other
// packages' files built for one machine only (*_amd64.go, *_arm64.go,
// bpf2go's *_x86_bpfel.go and *_arm64_bpfel.go, or a //go:build line naming
// one machine), which hold what cannot be said as data here (ptrace's
// injection, perf's record decoding). Anywhere else a name of
// x/sys/unix.PtraceRegs' fields (x86_64's Rax, Orig_rax, Rip, Rsp...;
// aarch64's Pc, Sp, Pstate), PTRACE_GETREGS, or an x86 word index of
// target.Regs is an x86 fact out of place, and fails this test. Comments
// are not read.
//
// pending lists the files that still use debuggee.Regs' x86 word indexes
// (RegRIP, RegRSP...) or x86 DWARF numbers of their own (regRBP...)
// outside a per-machine file: none since the unwinder takes its machine
// (issue 31). A file leaves the list when it stops; the test fails if a
// listed one no longer needs to be.
var pending = []string{}

var (
	regFields  = regexp.MustCompile(`\.(Rax|Rbx|Rcx|Rdx|Rsi|Rdi|Rbp|Rsp|Rip|Orig_rax|Eflags|Fs_base|Gs_base|R8|R9|R10|R11|R12|R13|R14|R15|Pc|Sp|Pstate)\b|\bOrig_rax\b|PtraceGetRegs|PtraceSetRegs|PTRACE_GETREGS\b|PTRACE_SETREGS\b`)
	regIndexes = regexp.MustCompile(`\bReg(RAX|RBX|RCX|RDX|RSI|RDI|RBP|RSP|RIP|R8|R9|R10|R11|R12|R13|R14|R15|OrigRAX|CS|SS|DS|ES|FS|GS|FSBase|GSBase|EFLAGS)\b|\breg(RBP|RBX|RSP|RIP|RA)\b`)
	oneMachine = regexp.MustCompile(`^//go:build (amd64|arm64)$`)
)

func TestRegisterNamesStayInArchFiles(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("not run from the module's tree")
	}
	stillPending := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "testdata" || strings.HasSuffix(rel, "/testdata") || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || perMachine(rel) || rel == "internal/arch/seam_test.go" {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if oneMachine.MatchString(line) {
				return nil
			}
			if i := strings.Index(line, "//"); i >= 0 {
				line = line[:i]
			}
			if m := regFields.FindString(line); m != "" {
				t.Errorf("%s:%d: %q names a machine's register outside a per-machine file", rel, n, m)
			}
			if regIndexes.MatchString(line) {
				if !slices.Contains(pending, rel) {
					t.Errorf("%s:%d: an x86 register index outside a per-machine file: use internal/arch", rel, n)
				}
				stillPending[rel] = true
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if !stillPending[p] {
			t.Errorf("%s no longer uses x86 register indexes: take it off the pending list", p)
		}
	}
}

// perMachine: this package's per-machine files, or a file built for one
// machine by its name.
func perMachine(rel string) bool {
	base := filepath.Base(rel)
	if filepath.Dir(rel) == "internal/arch" && (strings.HasPrefix(base, "amd64") || strings.HasPrefix(base, "arm64")) {
		return true
	}
	for _, s := range []string{"_amd64.go", "_arm64.go", "_amd64_test.go", "_arm64_test.go", "_x86_bpfel.go", "_arm64_bpfel.go"} {
		if strings.HasSuffix(base, s) {
			return true
		}
	}
	return false
}
