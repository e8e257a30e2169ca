package core

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// crashed is a kernel core of testdata/arenas.c, dumped right after the
// target wrote malloc_info into its own memory at xmlAddr.
type crashed struct {
	core    string
	xml     []byte
	xmlAddr uint64
	pid     int
	threads int
}

func dumpCore(t *testing.T) crashed {
	t.Helper()
	testutil.EnableCores(t)
	dir := t.TempDir()
	cmd := exec.Command(testutil.BuildC(t, "arenas.c"), "park", "3")
	cmd.Dir = dir
	tg := testutil.StartCmd(t, cmd)
	own := filepath.Join(dir, "own.xml")
	if _, err := fmt.Fprintf(tg.Stdin(), "crash %s\n", own); err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(tg.Next())
	if len(f) != 2 || f[0] != "crashing" {
		t.Fatalf("target said %q", f)
	}
	addr, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	tg.Wait()
	xml, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	return crashed{core: testutil.CoreOf(t, dir, tg.Pid), xml: xml, xmlAddr: addr, pid: tg.Pid, threads: 4}
}

func TestKernelCore(t *testing.T) {
	cr := dumpCore(t)
	c, err := Open(cr.core)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkCore(t, c, cr)
}

func checkCore(t *testing.T, c *Core, cr crashed) {
	t.Helper()
	if c.Pid != cr.pid || len(c.Threads) != cr.threads || c.Command != "arenas" {
		t.Errorf("pid %d (want %d), %d threads (want %d), command %q", c.Pid, cr.pid, len(c.Threads), cr.threads, c.Command)
	}
	if c.Signal == nil || c.Signal.Signo != int32(syscall.SIGABRT) {
		t.Errorf("signal %+v, want SIGABRT", c.Signal)
	}
	if c.Threads[0].Tid != cr.pid {
		t.Errorf("first thread %d, want the one that raised the signal (%d)", c.Threads[0].Tid, cr.pid)
	}
	for _, th := range c.Threads {
		if th.TP() == 0 || th.SP() == 0 {
			t.Errorf("thread %d: fs_base %#x sp %#x", th.Tid, th.TP(), th.SP())
		}
	}
	got := make([]byte, len(cr.xml))
	if _, err := c.ReadAt(got, cr.xmlAddr); err != nil || !bytes.Equal(got, cr.xml) {
		t.Errorf("memory at %#x does not hold the XML the process wrote there (%v)", cr.xmlAddr, err)
	}
	if !strings.HasSuffix(c.Exe(), "/arenas") {
		t.Errorf("executable %q", c.Exe())
	}
	maps.Classify(c.Mappings, maps.Hints{ExePath: c.Exe(), StackPointers: c.StackPointers()})
	classes := map[maps.Class]int{}
	libc := false
	for _, m := range c.Mappings {
		classes[m.Class]++
		libc = libc || strings.HasSuffix(m.Path, "/libc.so.6")
	}
	for _, want := range []maps.Class{maps.ClassMainHeap, maps.ClassArenaHeap, maps.ClassMainStack, maps.ClassThreadStack, maps.ClassExecutable, maps.ClassSharedLib} {
		if classes[want] == 0 {
			t.Errorf("no %s mapping in %v", want, classes)
		}
	}
	if !libc {
		t.Error("libc.so.6 is not among the mappings")
	}
	// A PROT_NONE arena reservation is mapped but was not dumped.
	for _, m := range c.Mappings {
		if m.Perms == "---p" && m.Class == maps.ClassArenaHeap {
			var b [8]byte
			if _, err := c.ReadAt(b[:], m.Start); !errors.Is(err, ErrNotInCore) {
				t.Errorf("reading the reservation at %#x: %v, want ErrNotInCore", m.Start, err)
			}
			break
		}
	}
}

func TestCompressedCores(t *testing.T) {
	cr := dumpCore(t)
	raw, err := os.ReadFile(cr.core)
	if err != nil {
		t.Fatal(err)
	}
	for name, compress := range map[string]func(io.Writer) io.WriteCloser{
		"zstd": func(w io.Writer) io.WriteCloser { z, _ := zstd.NewWriter(w); return z },
		"gzip": func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
		"xz":   func(w io.Writer) io.WriteCloser { x, _ := xz.NewWriter(w); return x },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "core."+name)
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w := compress(f)
			w.Write(raw)
			w.Close()
			f.Close()
			tmpdir := t.TempDir()
			t.Setenv("TMPDIR", tmpdir)
			c, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			checkCore(t, c, cr)
			// The unpacked copy is never linked into TMPDIR, so that
			// not even SIGKILL can leave it there.
			if left, _ := os.ReadDir(tmpdir); len(left) != 0 {
				t.Errorf("files in TMPDIR while the core is open: %v", left)
			}
			c.Close()
		})
	}
}

// Files that are not usable cores: one clear error each, never a panic.
func TestBadCores(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cr := dumpCore(t)
	raw, _ := os.ReadFile(cr.core)
	exe, _ := os.ReadFile("/proc/self/exe")
	arm := append([]byte(nil), raw[:64]...)
	arm[18], arm[19] = 243, 0 // e_machine = EM_RISCV
	for _, c := range []struct{ name, path, want string }{
		{"empty", write("empty", nil), "empty file"},
		{"random", write("random", bytes.Repeat([]byte{0x5a, 0x17, 0x99}, 5000)), "not an ELF file"},
		{"gzip of junk", write("junk.gz", []byte{0x1f, 0x8b, 1, 2, 3}), "gzip"},
		{"executable", write("exe", exe[:min(len(exe), 1<<20)]), "not a core file"},
		{"other arch", write("arm", arm), "another architecture"},
		{"truncated", write("half", raw[:len(raw)/2]), "truncated"},
		{"headers only", write("head", raw[:4096]), "truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			core, err := Open(c.path)
			if err == nil {
				core.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), c.path) {
				t.Errorf("error %q, want it to name the file and say %q", err, c.want)
			}
		})
	}
}
