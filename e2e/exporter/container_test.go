package exporter

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// The three ways a user reaches a server in a container (docs/containers.md):
// from the host, into the container's pid and mount namespaces and its own
// glibc; from a debug container that shares the target's pid namespace
// (`kubectl debug --target`); and the exporter as a DaemonSet with only the
// capabilities its manifest grants. The container is what a runtime makes
// of an image: a pid namespace whose init is tinyinit.c (as `docker run
// --init` or a pod's pause-and-tini), a mount namespace whose root holds
// another Debian release's glibc (bullseye's 2.31, from
// scripts/fetch-glibc.sh) and nothing of the host's.

// container is a target running in a root filesystem of its own, under
// unshare's new pid and mount namespaces.
type container struct {
	root   string             // the container's root, as the host sees it
	tg     *testutil.Target   // unshare, whose stdin and stdout are the target's
	pid    int                // the target's pid on the host
	nspid  int                // and in its namespace
	init   int                // the namespace's init on the host (tinyinit, or the target itself)
	libc   testutil.GlibcTree // the glibc the root holds
	asInit bool
}

// startContainer starts testdata/arenas.c ("park 3") in a container on
// glibc 2.31: under tinyinit, or, with asInit, as the init of its pid
// namespace itself (a container started without --init).
func startContainer(t *testing.T, asInit bool) *container {
	t.Helper()
	return startContainerAs(t, asInit, 0)
}

// startContainerAs is startContainer with the container's processes run
// as uid and gid (0: root).
func startContainerAs(t *testing.T, asInit bool, uid int) *container {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	var tree testutil.GlibcTree
	for _, g := range testutil.GlibcTrees(t) {
		if g.Version == "2.31" {
			tree = g
		}
	}
	if tree.Loader == "" {
		t.Skip("no glibc 2.31 tree: run scripts/fetch-glibc.sh")
	}
	bin := testutil.BuildC(t, "arenas.c", testutil.GlibcSysroot(t)...)
	root := filepath.Join(t.TempDir(), "rootfs")
	// The tree is bullseye's libc6 unpacked: /lib/x86_64-linux-gnu holds
	// its libc and loader. A hard-linked copy where the file system allows
	// it, since the tree is 48 MB.
	if out, err := exec.Command("sh", "-c", `cp -al "$1/." "$2" 2>/dev/null || cp -a "$1/." "$2"`, "sh", tree.Dir, root).CombinedOutput(); err != nil {
		t.Fatalf("copying the glibc tree: %v\n%s", err, out)
	}
	for _, d := range []string{"proc", "tmp", "lib64"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(root, "lib64", "ld-linux-x86-64.so.2"))
	if err := os.Symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", filepath.Join(root, "lib64", "ld-linux-x86-64.so.2")); err != nil {
		t.Fatal(err)
	}
	copyFile(t, bin, filepath.Join(root, "target"))
	if !fileExists("/usr/lib/x86_64-linux-gnu/libc.a") {
		t.Skip("no libc.a for the static init")
	}
	copyFile(t, testutil.BuildC(t, "tinyinit.c", "-static"), filepath.Join(root, "init"))
	if err := os.MkdirAll(filepath.Join(root, "oldroot"), 0o755); err != nil {
		t.Fatal(err)
	}
	// As a runtime does: the root is a mount of the container's own (a bind
	// mount here, an overlay there) made its mount namespace's root by
	// pivot_root, with the old root detached. So the host sees the
	// container's files at the paths the container gives them (/target,
	// /lib/...), which name nothing or other files on the host: arenactl
	// must go through /proc/PID/map_files or /proc/PID/root.
	initArgs := "-P -u /oldroot"
	if uid != 0 {
		initArgs += " -U " + strconv.Itoa(uid)
		if err := os.Chown(filepath.Join(root, "tmp"), uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	if asInit {
		initArgs += " -e"
	}
	script := `set -e; mount --bind "$1" "$1"; cd "$1"; pivot_root . oldroot; exec /init ` + initArgs + ` /target park 3`
	c := &container{root: root, libc: tree, asInit: asInit}
	c.tg = testutil.StartCmd(t, exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private", "sh", "-c", script, "sh", root))
	c.init = onlyChild(t, c.tg.Pid)
	c.pid = c.init
	if !asInit {
		c.pid = onlyChild(t, c.init)
	}
	c.nspid = nsPid(t, c.pid)
	if (c.nspid == 1) != asInit {
		t.Fatalf("the target is pid %d in its namespace", c.nspid)
	}
	if m, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", c.pid)); !regexp.MustCompile(`(?m) /target$`).Match(m) {
		t.Fatalf("the host does not see the target's files at the container's paths:\n%s", m)
	}
	return c
}

// ownReport is the target's own malloc_info, written inside its root.
func (c *container) ownReport(t *testing.T) string {
	t.Helper()
	if a := c.tg.Send("report /tmp/own.xml"); a != "ok" {
		t.Fatalf("target report: %s", a)
	}
	b, err := os.ReadFile(filepath.Join(c.root, "tmp", "own.xml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// freeze has the target write its malloc_info and stop itself (SIGSTOP),
// and returns that XML: what a read-only walk must print while it stays
// stopped. thaw (the package's) lets it go on.
func (c *container) freeze(t *testing.T) string {
	t.Helper()
	if _, err := fmt.Fprintf(c.tg.Stdin(), "freeze /tmp/frozen.xml\n"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the target to stop itself", func() bool { return processState(c.pid) == 'T' })
	b, err := os.ReadFile(filepath.Join(c.root, "tmp", "frozen.xml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (c *container) thaw(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(c.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if a := c.tg.Next(); a != "ok" {
		t.Fatalf("target after SIGCONT: %q", a)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// onlyChild is the one child of pid, once it has one.
func onlyChild(t *testing.T, pid int) int {
	t.Helper()
	var kids []string
	testutil.WaitUntil(t, fmt.Sprintf("a child of %d", pid), func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		kids = strings.Fields(string(b))
		return len(kids) > 0
	})
	if len(kids) != 1 {
		t.Fatalf("process %d has children %v, want one", pid, kids)
	}
	n, _ := strconv.Atoi(kids[0])
	return n
}

// nsPid is pid's number in its own pid namespace (the last of NSpid).
func nsPid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "NSpid:" {
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	t.Fatal("no NSpid in status")
	return 0
}

// From the host: arenactl on the node, the server in its container with
// another glibc than the host's. arenactl must find that libc through the
// process's root (its path in /proc/PID/maps names the host's libc, or
// nothing the host has), call glibc's own malloc_info there, read it from
// memory with the right layout, and image it.
func TestContainerFromHost(t *testing.T) {
	c := startContainer(t, false)
	pid := strconv.Itoa(c.pid)
	want := c.ownReport(t)
	if r := mustRun(t, "info", "--xml", pid); r.Stdout != want {
		t.Fatalf("info --xml differs from the target's own malloc_info\n--- target\n%s\n--- arenactl\n%s", want, r.Stdout)
	}
	frozen := c.freeze(t)
	if r := mustRun(t, "info", "--read-only", "--xml", pid); r.Stdout != frozen {
		t.Fatalf("info --read-only --xml differs from the frozen target's own malloc_info\n--- target\n%s\n--- arenactl\n%s", frozen, r.Stdout)
	}
	c.thaw(t)
	var got jsonInfo
	if err := decodeDoc([]byte(mustRun(t, "info", "--json", pid).Stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Libc.Version != "2.31" || len(got.Arenas) != 4 {
		t.Errorf("glibc %q (want 2.31, the container's), %d arenas (want 4)", got.Libc.Version, len(got.Arenas))
	}
	// The image is a child of the target's; when it ends, the container's
	// init reaps it, as the host's would.
	r := mustRun(t, "heap", pid)
	if !strings.Contains(r.Stdout, "copy-on-write image") {
		t.Errorf("heap did not read from an image:\n%s", r.Stdout)
	}
	core := filepath.Join(t.TempDir(), "c.core")
	live := mustRun(t, "info", "--read-only", "--xml", pid).Stdout
	mustRun(t, "snapshot", pid, "-o", core)
	if r := mustRun(t, "info", "--xml", core); r.Stdout != live {
		t.Errorf("the snapshot's XML differs from the live walk's\n--- live\n%s\n--- snapshot\n%s", live, r.Stdout)
	}
	mustRun(t, "trim", pid)
	mustQuit(t, c.tg)
}

// A container started without an init: the server is pid 1 of its
// namespace. An image of it would be left to it to reap, so none is made:
// info --read-only falls back to a walk with the process stopped and says
// why; heap refuses with its reason and the way around it (exit 14), and
// --freeze walk does it.
func TestContainerTargetIsInit(t *testing.T) {
	c := startContainer(t, true)
	pid := strconv.Itoa(c.pid)
	// An init cannot stop itself (SIGSTOP from inside its namespace is
	// ignored), so the walk is checked against the injected call's numbers
	// that an allocation cannot move.
	var injected, walked jsonInfo
	if err := decodeDoc([]byte(mustRun(t, "info", "--json", pid).Stdout), &injected); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, "info", "--read-only", "--json", pid)
	if err := decodeDoc([]byte(r.Stdout), &walked); err != nil {
		t.Fatal(err)
	}
	if walked.Libc.Version != "2.31" || len(walked.Arenas) != 4 || len(injected.Arenas) != 4 {
		t.Fatalf("read-only: glibc %q, %d arenas; injected: %d arenas", walked.Libc.Version, len(walked.Arenas), len(injected.Arenas))
	}
	for i := range walked.Arenas {
		if w, in := walked.Arenas[i].SystemCurrent, injected.Arenas[i].SystemCurrent; w != in {
			t.Errorf("arena %d: system %d read, %d by malloc_info", i, w, in)
		}
	}
	if r := mustRun(t, "info", "--read-only", pid); !strings.Contains(r.Stdout+r.Stderr, "init of its pid namespace") {
		t.Errorf("info --read-only does not say why it made no image:\n%s%s", r.Stdout, r.Stderr)
	}
	r = run(t, "heap", pid)
	if r.Code != 14 || !strings.Contains(r.Stderr, "init of its pid namespace") || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
		t.Errorf("heap on a pid namespace's init: exit %d, %q; want 14 and one line saying why", r.Code, r.Stderr)
	}
	mustRun(t, "heap", "--freeze", "walk", pid)
	mustQuit(t, c.tg)
}

// From a debug container (`kubectl debug --target`): arenactl runs in the
// target's pid namespace with a /proc of that namespace and a root of its
// own; it knows the target by its pid there, finds its libc through
// /proc/PID/root, and images it.
func TestContainerFromDebugContainer(t *testing.T) {
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("no nsenter")
	}
	c := startContainer(t, false)
	want := c.ownReport(t)
	inside := func(args ...string) result {
		t.Helper()
		// nsenter's child is in the target's pid namespace; unshare gives
		// it a mount namespace with that namespace's /proc, as a debug
		// container's runtime does.
		cmd := exec.Command("nsenter", append([]string{"--target", strconv.Itoa(c.init), "--pid", "--",
			"unshare", "--mount", "--mount-proc=/proc", arenactl}, args...)...)
		return runCmd(t, cmd)
	}
	pid := strconv.Itoa(c.nspid)
	if r := inside("info", "--xml", pid); r.Code != 0 || r.Stdout != want {
		t.Fatalf("info in the debug container: exit %d, %s\n--- target\n%s\n--- arenactl\n%s", r.Code, r.Stderr, want, r.Stdout)
	}
	frozen := c.freeze(t)
	if r := inside("info", "--read-only", "--xml", pid); r.Code != 0 || r.Stdout != frozen {
		t.Fatalf("info --read-only in the debug container: exit %d, %s\n--- target\n%s\n--- arenactl\n%s", r.Code, r.Stderr, frozen, r.Stdout)
	}
	c.thaw(t)
	if r := inside("heap", pid); r.Code != 0 || !strings.Contains(r.Stdout, "copy-on-write image") {
		t.Errorf("heap in the debug container: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	mustQuit(t, c.tg)
}

// manifestCaps are the capabilities contrib/kubernetes/exporter-daemonset.yaml
// adds, in the kernel's names for setpriv ("sys_ptrace").
func manifestCaps(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "contrib", "kubernetes", "exporter-daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*add: \[(.*)\]`).FindSubmatch(b)
	if m == nil || !regexp.MustCompile(`(?m)^\s*drop: \["ALL"\]`).Match(b) || !strings.Contains(string(b), "hostPID: true") {
		t.Fatal("the DaemonSet does not drop ALL and add a list of capabilities in hostPID")
	}
	var caps []string
	for _, c := range strings.Split(string(m[1]), ",") {
		caps = append(caps, strings.ToLower(strings.Trim(strings.TrimSpace(c), `"`)))
	}
	return caps
}

// growthCaps are what `growth` needs beyond the exporter's, as
// docs/containers.md states them: perf events and their rings (PERFMON,
// IPC_LOCK for rings past perf_event_mlock_kb) and the calls' eBPF program
// (BPF).
var growthCaps = []string{"perfmon", "bpf", "ipc_lock"}

// withCaps runs arenactl as root with only caps in its bounding set (so
// permitted and effective), no new privileges, as a container runtime
// that drops ALL and adds them does.
func withCaps(caps []string, args ...string) *exec.Cmd {
	set := "-all"
	for _, c := range caps {
		set += ",+" + c
	}
	return exec.Command("setpriv", append([]string{"--bounding-set=" + set, "--inh-caps=-all", "--no-new-privs", arenactl}, args...)...)
}

// The least privilege the DaemonSet grants is enough, and each capability
// in it is needed: the exporter and the read-only commands run against a
// server of another user in a container with exactly those, and fail with
// any one left out. The systemd unit grants the same. growth works with
// the documented additions.
func TestLeastPrivilege(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	caps := manifestCaps(t)
	doc, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "docs", "containers.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(append([]string{}, caps...), growthCaps...) {
		if !strings.Contains(string(doc), "`"+strings.ToUpper(c)+"`") {
			t.Errorf("docs/containers.md does not name `%s`", strings.ToUpper(c))
		}
	}
	unit, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "contrib", "arenactl-exporter.service"))
	if err != nil {
		t.Fatal(err)
	}
	var unitCaps []string
	for _, c := range caps {
		unitCaps = append(unitCaps, "CAP_"+strings.ToUpper(c))
	}
	if want := "CapabilityBoundingSet=" + strings.Join(unitCaps, " "); !strings.Contains(string(unit), want+"\n") {
		t.Errorf("the systemd unit's capabilities are not the DaemonSet's: want %q", want)
	}

	c := startContainerAs(t, false, 65534)
	pid := strconv.Itoa(c.pid)
	for _, args := range [][]string{{"info", "--read-only", pid}, {"heap", pid}, {"info", pid}} {
		if r := runCmd(t, withCaps(caps, args...)); r.Code != 0 {
			t.Errorf("arenactl %v with %v: exit %d\n%s", args, caps, r.Code, r.Stderr)
		}
		for i := range caps {
			fewer := append(append([]string{}, caps[:i]...), caps[i+1:]...)
			if r := runCmd(t, withCaps(fewer, args...)); r.Code != 4 {
				t.Errorf("arenactl %v without %s: exit %d, want 4 (permission)\n%s", args, caps[i], r.Code, r.Stderr)
			}
		}
	}
	// The tracepoints' ids are read from tracefs: where it is not mounted,
	// arenactl mounts it in a namespace of its own, which takes SYS_ADMIN.
	more := growthCaps
	if _, err := os.Stat("/sys/kernel/tracing/events"); err != nil {
		more = append(append([]string{}, growthCaps...), "sys_admin")
	}
	if r := runCmd(t, withCaps(append(append([]string{}, caps...), more...), "growth", "--duration", "1s", pid)); r.Code != 0 || strings.Contains(r.Stderr, "eBPF refused") {
		t.Errorf("growth with %v and %v: exit %d\n%s", caps, more, r.Code, r.Stderr)
	}

	// The exporter as the DaemonSet runs it.
	e := &exporterProc{start: time.Now()}
	e.cmd = withCaps(caps, "exporter", "--listen", "127.0.0.1:0", "--pid", pid, "--min-interval", "1s")
	startedExporter(t, e)
	e.waitFor(t, "the target collected", func(ms metricSet) bool {
		up, ok := upOf(ms, c.pid)
		return ok && up == 1
	})
	mustQuit(t, c.tg)
}
