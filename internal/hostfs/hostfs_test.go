package hostfs

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// specials makes one of each kind of node that is not a regular file.
func specials(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	if err := unix.Mknod(p("chr"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod (the tests run as root): %v", err)
	}
	if err := unix.Mkfifo(p("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p("sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	os.Mkdir(p("dir"), 0o755)
	os.WriteFile(p("target"), []byte("keep"), 0o644)
	os.Symlink(p("target"), p("link"))
	return map[string]string{
		"character device": p("chr"), "FIFO": p("fifo"), "socket": p("sock"),
		"directory": p("dir"), "symbolic link": p("link"),
	}
}

func TestCheckOutputRefusesNonRegular(t *testing.T) {
	for kind, p := range specials(t) {
		err := CheckOutput(p)
		if !IsNotRegular(err) || !strings.Contains(err.Error(), kind) && !(kind == "directory" && strings.Contains(err.Error(), "is a directory")) {
			t.Errorf("%s: %v", kind, err)
		}
		if _, err := CreateOutput(p); !IsNotRegular(err) {
			t.Errorf("CreateOutput over a %s: %v", kind, err)
		}
	}
}

// A node put at the path while the file was written is not replaced: the
// check is made again at the rename.
func TestCommitRechecks(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "core")
	o, err := CreateOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Discard()
	unix.Mkfifo(out, 0o644)
	if err := o.Commit(); !IsNotRegular(err) {
		t.Fatalf("commit over a FIFO: %v", err)
	}
	if fi, _ := os.Lstat(out); fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v", fi.Mode())
	}
	o.Discard()
	if left, _ := filepath.Glob(filepath.Join(dir, ".core.partial-*")); len(left) != 0 {
		t.Fatalf("partial files left: %v", left)
	}

	os.Remove(out)
	os.WriteFile(out, []byte("old"), 0o644)
	o, err = CreateOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	o.WriteString("new")
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "new" {
		t.Fatalf("regular file not replaced: %q", b)
	}
}

// Partial files of a writer killed with SIGKILL are removed by the next
// writer of the same path; those of a live writer, another user's, and
// other paths' are kept.
func TestStalePartials(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "snap.core")
	p := func(n string) string { return filepath.Join(dir, n) }

	killed := p(".snap.core.partial-111")
	// -o: the lock is flock(1)'s own, not inherited by sleep, so that
	// killing flock(1) releases it as a killed arenactl's would be.
	holder := exec.Command("flock", "-o", killed, "sleep", "600")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Skipf("flock(1): %v", err)
	}
	defer syscall.Kill(-holder.Process.Pid, syscall.SIGKILL) // its sleep
	live := p(".snap.core.partial-222")
	liveHolder := exec.Command("flock", live, "sleep", "600")
	liveHolder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := liveHolder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-liveHolder.Process.Pid, syscall.SIGKILL); liveHolder.Wait() }()
	for _, f := range []string{killed, live} {
		for deadline := time.Now().Add(time.Minute); ; {
			if lockedElsewhere(f) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("flock(1) never locked %s", f)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	// flock(1) forks before it runs sleep, and its child closes the
	// inherited descriptor only then: the lock outlives flock(1) by that
	// moment, longer on a loaded machine.
	for deadline := time.Now().Add(time.Minute); lockedElsewhere(killed); {
		if time.Now().After(deadline) {
			t.Fatalf("%s still locked after its holder was killed", killed)
		}
		time.Sleep(10 * time.Millisecond)
	}

	old := p(".snap.core.partial-333") // never locked: an older arenactl's
	os.WriteFile(old, []byte("x"), 0o600)
	others := p(".snap.core.partial-444")
	os.WriteFile(others, []byte("x"), 0o600)
	os.Chown(others, 65534, 65534)
	otherPath := p(".other.core.partial-555")
	os.WriteFile(otherPath, []byte("x"), 0o600)

	o, err := CreateOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Discard()
	if got := strings.Join(o.Removed, " "); got != killed+" "+old {
		t.Errorf("removed %q, want the killed writer's and the unlocked one", got)
	}
	for _, f := range []string{live, others, otherPath, o.Name()} {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("%s removed: %v", f, err)
		}
	}
	for _, f := range []string{killed, old} {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s kept", f)
		}
	}
}

func lockedElsewhere(p string) bool {
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil
}

func TestOpenRegular(t *testing.T) {
	sp := specials(t)
	for kind, p := range sp {
		if kind == "symbolic link" {
			continue
		}
		_, err := OpenRegular(p)
		if !IsNotRegular(err) || !strings.Contains(err.Error(), kind) && kind != "directory" {
			t.Errorf("%s: %v", kind, err)
		}
	}
	// No writer: a blocking open would wait forever.
	if _, err := OpenRegular(sp["FIFO"]); err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("FIFO: %v", err)
	}
	for _, dev := range []string{"/dev/zero", "/dev/urandom"} {
		if _, err := OpenRegular(dev); err == nil || !strings.Contains(err.Error(), "not a regular file (a character device)") {
			t.Errorf("%s: %v", dev, err)
		}
	}
	f, err := OpenRegular(sp["symbolic link"])
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if n, _ := f.Read(b); string(b[:n]) != "keep" {
		t.Errorf("read %q through the link", b[:n])
	}
	f.Close()
}
