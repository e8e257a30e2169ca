package walk

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os/exec"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"

	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/testutil"
)

// snapshot -o never replaces what is not a regular file (a device node, a
// FIFO, a symbolic link), refuses before touching the target, and removes
// the partial files a killed snapshot of the same path left.
func TestSnapshotOutputNotRegular(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "2")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	if err := unix.Mknod(p("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	unix.Mkfifo(p("fifo"), 0o644)
	os.WriteFile(p("kept"), []byte("kept"), 0o644)
	os.Symlink(p("kept"), p("link"))
	pid := fmt.Sprint(tg.Pid)
	for out, kind := range map[string]string{"null": "character device", "fifo": "FIFO", "link": "symbolic link"} {
		expectRefusal(t, run(t, "snapshot", pid, "-o", p(out)), exitUsage, p(out), "not a regular file ("+"a "+kind+")")
	}
	expectRefusal(t, run(t, "snapshot", pid, "-o", dir), exitUsage, "is a directory")
	var st unix.Stat_t
	if unix.Lstat(p("null"), &st); st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("the device node was replaced (mode %o)", st.Mode)
	}
	if l, _ := os.Readlink(p("link")); l != p("kept") {
		t.Errorf("the link was replaced")
	}
	if b, _ := os.ReadFile(p("kept")); string(b) != "kept" {
		t.Errorf("the link's file was written: %q", b)
	}

	// What a SIGKILLed snapshot leaves: a partial file nobody holds.
	stale := p(".snap.core.partial-1234")
	os.WriteFile(stale, make([]byte, 4096), 0o600)
	r := mustRun(t, "snapshot", pid, "-o", p("snap.core"))
	if !strings.Contains(r.Stderr, "removed 1 partial file") || !strings.Contains(r.Stderr, stale) {
		t.Errorf("stderr: %q", r.Stderr)
	}
	if _, err := os.Lstat(stale); err == nil {
		t.Error("the stale partial file is still there")
	}
	if left, _ := filepath.Glob(p(".*")); len(left) != 0 {
		t.Errorf("hidden files left: %v", left)
	}
	if testutil.Traced(tg.Pid) || processState(tg.Pid) != 'S' {
		t.Error("the target was left traced or stopped")
	}
	mustQuit(t, tg)
}

// fixtureCore is the uncompressed kernel core of the 2.36 fixture, with
// the system libc it ran with ("" when this machine lacks it).
func fixtureCore(t *testing.T) (raw []byte, libc string) {
	t.Helper()
	for _, fx := range testutil.CoreFixtures(t) {
		if fx.Version != "2.36" || fx.Kind != "kernel" {
			continue
		}
		b, err := os.ReadFile(fx.Core)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := zstd.NewReader(nil)
		defer d.Close()
		raw, err := d.DecodeAll(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return raw, testutil.LibcFileFor(t, "2.36")
	}
	t.Fatal("no 2.36 kernel core among the fixtures")
	return nil, ""
}

// writeCore writes a crafted core into a temporary directory.
func writeCore(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// expectQuickRefusal runs arenactl on a crafted input: one line and the
// exit code, never a crash or a hang (a run past a minute counts as one;
// the tests assert no time beyond that guard).
func expectQuickRefusal(t *testing.T, code int, words []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, arenactl, args...)
	r := runCmd(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("arenactl %s hung", strings.Join(args, " "))
	}
	expectRefusal(t, r, code, words...)
}

// libc's writable PT_LOAD claiming 2^45 bytes and main_arena.next zeroed:
// the scan for main_arena read the whole mapping and ran out of memory.
func TestCraftedCoreHugeLibcSegment(t *testing.T) {
	raw, libc := fixtureCore(t)
	if libc == "" {
		t.Skip("the system libc of the 2.36 fixture is missing")
	}
	src := writeCore(t, "orig", raw)
	c, err := core.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	mo, err := glibc.FromMemory(c.Mappings, c.WithFiles(func(string) (*os.File, error) { return nil, os.ErrNotExist }))
	if err != nil {
		t.Fatal(err)
	}
	nextAt := mo.Anchors.MainArena + uint64(mo.Layout.StateNext)
	ef, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	zeroed, grown := false, false
	for i, p := range ef.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		if p.Vaddr <= nextAt && nextAt+8 <= p.Vaddr+p.Filesz {
			clear(raw[p.Off+nextAt-p.Vaddr:][:8])
			zeroed = true
			if p.Flags&elf.PF_W != 0 {
				// That segment is libc's .data: make it claim 2^45 bytes.
				ph := binary.LittleEndian.Uint64(raw[32:]) + uint64(i)*uint64(binary.LittleEndian.Uint16(raw[54:]))
				binary.LittleEndian.PutUint64(raw[ph+40:], 1<<45)
				grown = true
			}
		}
	}
	c.Close()
	if !zeroed || !grown {
		t.Fatalf("main_arena.next at %#x not in a writable segment of the core", nextAt)
	}
	crafted := writeCore(t, "huge-libc.core", raw)
	// The segment now runs into the ones after it: refused as a core no
	// process has (the scan for main_arena that read it whole is bounded:
	// internal/glibc's TestScanMainArenaHugeMapping).
	expectQuickRefusal(t, exitBadCore, []string{crafted, "overlap"}, "info", "--libc", libc, "--debug-dir", t.TempDir(), crafted)
}

// noteAt is the file offset of the header of the first note of type typ.
func noteAt(t *testing.T, raw []byte, typ uint32) int {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		for off := p.Off; off+12 <= p.Off+p.Filesz; {
			namesz, descsz := binary.LittleEndian.Uint32(raw[off:]), binary.LittleEndian.Uint32(raw[off+4:])
			if binary.LittleEndian.Uint32(raw[off+8:]) == typ {
				return int(off)
			}
			off += 12 + uint64(namesz+3)&^3 + uint64(descsz+3)&^3
		}
	}
	t.Fatalf("no note of type %#x", typ)
	return 0
}

// Crafted inputs get one line and exit 12, quickly: an NT_FILE note of 48
// bytes claiming 2 files (it panicked: slice bounds out of range), a FIFO
// (open(2) blocked forever), a directory, /dev/zero and /dev/urandom
// ("not an ELF file", "empty file" before).
func TestCraftedCoreInputs(t *testing.T) {
	raw, _ := fixtureCore(t)
	n := noteAt(t, raw, 0x46494c45) // NT_FILE
	nameEnd := n + 12 + int(binary.LittleEndian.Uint32(raw[n:])+3)&^3
	binary.LittleEndian.PutUint32(raw[n+4:], 48)
	binary.LittleEndian.PutUint64(raw[nameEnd:], 2)
	ntFile := writeCore(t, "ntfile.core", raw)
	expectQuickRefusal(t, exitBadCore, []string{ntFile, "NT_FILE claims 2 files"}, "info", ntFile)

	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	unix.Mkfifo(fifo, 0o644)
	for _, cmd := range []string{"info", "maps"} {
		expectQuickRefusal(t, exitBadCore, []string{fifo, "not a regular file (a FIFO)"}, cmd, fifo)
		expectQuickRefusal(t, exitBadCore, []string{dir, "is a directory"}, cmd, dir)
		for _, dev := range []string{"/dev/zero", "/dev/urandom"} {
			expectQuickRefusal(t, exitBadCore, []string{dev, "not a regular file (a character device)"}, cmd, dev)
		}
	}
}

// A FIFO where the core's libc (or another file it maps) should be is
// passed over with a note, not opened for ever.
func TestCoreLibcIsFIFO(t *testing.T) {
	raw, _ := fixtureCore(t)
	core := writeCore(t, "core", raw)
	root := t.TempDir()
	fifo := filepath.Join(root, "usr/lib/x86_64-linux-gnu/libc.so.6")
	os.MkdirAll(filepath.Dir(fifo), 0o755)
	unix.Mkfifo(fifo, 0o644)
	for _, args := range [][]string{{"--sysroot", root}, {"--libc", fifo}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r := runCmd(t, exec.CommandContext(ctx, arenactl, append(append([]string{"info", "--json", "--debug-dir", root}, args...), core)...))
		hung := ctx.Err() != nil
		cancel()
		if hung {
			t.Fatalf("%v: arenactl hung on the FIFO", args)
		}
		if r.Code != exitOK || !strings.Contains(r.Stdout, "not a regular file (a FIFO)") {
			t.Errorf("%v: exit %d, stderr %s, notes lack the FIFO:\n%.2000s", args, r.Code, r.Stderr, r.Stdout)
		}
	}
}

// A core that may not be read, and one in a directory that may not be
// searched, give the one permission exit code (it was 1 for the first and
// 2 for the second).
func TestCoreUnreadable(t *testing.T) {
	raw, _ := fixtureCore(t)
	// Not under t.TempDir(), whose parent only root may search.
	dir, err := os.MkdirTemp("", "arenactl-perm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	core := filepath.Join(dir, "core")
	os.WriteFile(core, raw, 0o600)
	closed := filepath.Join(dir, "closed")
	os.Mkdir(closed, 0o700)
	inClosed := filepath.Join(closed, "core")
	os.WriteFile(inClosed, raw, 0o644)
	closedDir := filepath.Join(dir, "closed-dir")
	os.Mkdir(closedDir, 0o000)
	for _, p := range []string{core, inClosed, closedDir} {
		cmd := exec.Command(arenactl, "info", p)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		expectRefusal(t, runCmd(t, cmd), exitPermission, p, "permission denied")
	}
}

// zstdBomb is a zstd stream of head then about total zero bytes: one
// small frame of zeros repeated.
func zstdBomb(head []byte, total int64) []byte {
	e, _ := zstd.NewWriter(nil)
	defer e.Close()
	frame := e.EncodeAll(make([]byte, 8<<20), nil)
	out := e.EncodeAll(head, nil)
	for n := int64(0); n < total; n += 8 << 20 {
		out = append(out, frame...)
	}
	return out
}

// unpackingInto tells whether process pid has a file open in dir (the
// unpacked copy, unlinked, shows as "dir/#inode (deleted)").
func unpackingInto(pid int, dir string) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.HasPrefix(l, dir+"/") {
			return true
		}
	}
	return false
}

// Unpacking a compressed core honours SIGINT (it ran to the end before)
// and leaves nothing in TMPDIR, not even after SIGKILL; a bomb of zeros
// and a core claiming more than --max-unpacked are refused at once.
func TestUnpackHostile(t *testing.T) {
	raw, _ := fixtureCore(t)
	head := append([]byte(nil), raw[:64<<10]...)
	ef, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	// Its first PT_LOAD now claims 1 TiB of file.
	phoff, phent := binary.LittleEndian.Uint64(raw[32:]), uint64(binary.LittleEndian.Uint16(raw[54:]))
	for i, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			binary.LittleEndian.PutUint64(head[phoff+uint64(i)*phent+32:], 1<<40)
			break
		}
	}
	dir := t.TempDir()
	bombPath := filepath.Join(dir, "claims-1T.core.zst")
	os.WriteFile(bombPath, zstdBomb(head, 1<<40), 0o644)
	zeros := filepath.Join(dir, "zeros.zst")
	os.WriteFile(zeros, zstdBomb(nil, 16<<30), 0o644)

	tmp := t.TempDir()
	env := append(os.Environ(), "TMPDIR="+tmp)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		cmd := exec.Command(arenactl, "info", "--max-unpacked", "2T", bombPath)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		testutil.WaitUntil(t, "arenactl to unpack", func() bool { return unpackingInto(cmd.Process.Pid, tmp) })
		cmd.Process.Signal(sig)
		cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if sig != syscall.SIGKILL && (code != exitInterrupted || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "interrupted while unpacking "+bombPath)) {
			t.Errorf("%v: exit %d, stderr %q", sig, code, stderr.String())
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("%v: left in TMPDIR: %v", sig, left)
		}
	}

	cmd := exec.Command(arenactl, "info", bombPath)
	cmd.Env = env
	expectRefusal(t, runCmd(t, cmd), exitBadCore, bombPath, "more than the limit of 34359738368", "--max-unpacked")
	cmd = exec.Command(arenactl, "maps", zeros)
	cmd.Env = env
	expectRefusal(t, runCmd(t, cmd), exitBadCore, zeros, "does not hold an ELF file")
	fx := filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-2.36-kernel.core.zst")
	cmd = exec.Command(arenactl, "info", "--max-unpacked", "1M", fx)
	cmd.Env = env
	expectRefusal(t, runCmd(t, cmd), exitBadCore, "more than the limit of 1048576", "--max-unpacked")
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}

// A core whose libc memory is damaged (main_arena's bins overwritten), read
// without libc's file: its memory matches no layout, and the core is not
// usable as it is: exit 12 with the file named (it was exit 1), and the
// hint that a libc file may read it.
func TestCoreLibcMemoryDamaged(t *testing.T) {
	raw, _ := fixtureCore(t)
	src := writeCore(t, "orig", raw)
	c, err := core.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	mo, err := glibc.FromMemory(c.Mappings, c.WithFiles(func(string) (*os.File, error) { return nil, os.ErrNotExist }))
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	arena := mo.Anchors.MainArena
	damaged := false
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W != 0 && p.Vaddr <= arena && arena+0x800 <= p.Vaddr+p.Filesz {
			copy(raw[p.Off+arena-p.Vaddr:][:0x800], bytes.Repeat([]byte{0x5a}, 0x800))
			damaged = true
		}
	}
	if !damaged {
		t.Fatalf("main_arena at %#x is in no writable segment of the core", arena)
	}
	crafted := writeCore(t, "damaged-libc.core", raw)
	for _, cmd := range []string{"info", "heap"} {
		expectQuickRefusal(t, exitBadCore, []string{crafted, "matches no glibc layout", "--libc"}, cmd, "--no-libc-file", crafted)
	}
}
