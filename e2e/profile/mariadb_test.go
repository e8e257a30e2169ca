package profile

import (
	"encoding/json"
	"sync"

	"github.com/arenactl/arenactl/internal/testutil"

	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mariadb is a private mariadbd in a temporary directory: its own datadir,
// socket and error log, no network, started and stopped by the test.
type mariadb struct {
	t      *testing.T
	dir    string
	sock   string
	errLog string
	cmd    *exec.Cmd
	done   chan struct{}
	err    error // what Wait said, once done is closed
}

// client is a command of the MariaDB client suite talking to the server's
// socket as root.
func (m *mariadb) client(name string, args ...string) *exec.Cmd {
	return exec.Command(name, append([]string{"--no-defaults", "-S", m.sock, "-uroot"}, args...)...)
}

// answers reports whether the server runs a trivial query.
func (m *mariadb) answers() bool {
	return m.client("mariadb", "-e", "select 1").Run() == nil
}

// slap is a mariadb-slap load of concurrency clients running queries
// statements of a mixed insert/select workload, iterations times.
func (m *mariadb) slap(concurrency, iterations, queries int) *exec.Cmd {
	return m.client("mariadb-slap", fmt.Sprintf("--concurrency=%d", concurrency), fmt.Sprintf("--iterations=%d", iterations),
		fmt.Sprintf("--number-of-queries=%d", queries), "--auto-generate-sql", "--auto-generate-sql-load-type=mixed",
		"--auto-generate-sql-add-autoincrement")
}

// load runs mariadb-slap back to back in the background (concurrency
// clients, queries statements each run) until the returned stop is called,
// so that whatever runs meanwhile meets a busy server however fast the
// machine is. stop waits for the run under way and returns how many runs
// completed and the first failure, with its output. It is also called
// when the test ends; calling it again returns the same.
func (m *mariadb) load(concurrency, queries int) (stop func() (int, error)) {
	quit, done := make(chan struct{}), make(chan struct{})
	var err error
	runs := 0
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			var out bytes.Buffer
			load := m.slap(concurrency, 1, queries)
			load.Stdout, load.Stderr = &out, &out
			if e := load.Run(); e != nil {
				err = fmt.Errorf("mariadb-slap: %v\n%s", e, out.String())
				return
			}
			runs++
		}
	}()
	var once sync.Once
	stop = func() (int, error) {
		once.Do(func() { close(quit) })
		<-done
		return runs, err
	}
	m.t.Cleanup(func() { stop() })
	return stop
}

func (m *mariadb) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// installedDatadir is a datadir mariadb-install-db initialised, made once
// per test binary and copied by each server: the install takes about 10 s,
// most of it waiting on the disk, and is no part of what the tests check.
// It lies under testutil.Dir, removed when the tests end.
func installedDatadir(t *testing.T) string {
	t.Helper()
	installOnce.Do(func() {
		installDir = filepath.Join(testutil.Dir(t), "mariadb-datadir")
		if out, err := exec.Command("mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+installDir,
			"--auth-root-authentication-method=normal").CombinedOutput(); err != nil {
			installErr = fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
		}
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
	return installDir
}

var (
	installOnce sync.Once
	installDir  string
	installErr  error
)

// startMariaDB starts mariadbd on a copy of an initialised datadir, waiting
// until it answers. The server is killed when the test ends, unless stop
// shut it down first.
func startMariaDB(t *testing.T, extra ...string) *mariadb {
	t.Helper()
	for _, prog := range []string{"mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin", "mariadb-slap"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s is not installed (apt-get install mariadb-server mariadb-client)", prog)
		}
	}
	d := t.TempDir()
	m := &mariadb{t: t, dir: d, sock: filepath.Join(d, "mysqld.sock"), errLog: filepath.Join(d, "err.log"), done: make(chan struct{})}
	db := filepath.Join(d, "db")
	if out, err := exec.Command("cp", "-a", installedDatadir(t), db).CombinedOutput(); err != nil {
		t.Fatalf("copying the initialised datadir: %v\n%s", err, out)
	}
	m.cmd = exec.Command("mariadbd", "--no-defaults", "--user=root", "--datadir="+db, "--socket="+m.sock,
		"--pid-file="+filepath.Join(d, "mysqld.pid"), "--skip-networking", "--log-error="+m.errLog,
		"--innodb-buffer-pool-size=256M")
	m.cmd.Args = append(m.cmd.Args, extra...)
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting mariadbd: %v", err)
	}
	go func() { m.err = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		if !m.exited() {
			m.cmd.Process.Kill()
			<-m.done
		}
	})
	testutil.WaitUntil(t, "mariadbd to answer", func() bool {
		if m.exited() {
			t.Fatalf("mariadbd exited at start: %v\n%s", m.err, m.log())
		}
		return m.answers()
	})
	return m
}

func (m *mariadb) log() string {
	b, _ := os.ReadFile(m.errLog)
	return string(b)
}

// stop shuts the server down cleanly and checks that it exited with 0.
func (m *mariadb) stop() {
	m.t.Helper()
	if out, err := m.client("mariadb-admin", "shutdown").CombinedOutput(); err != nil {
		m.t.Fatalf("mariadb-admin shutdown: %v\n%s", err, out)
	}
	select {
	case <-m.done:
	case <-time.After(testutil.Patience):
		m.t.Fatalf("mariadbd did not exit after shutdown\n%s", m.log())
	}
	if m.err != nil {
		m.t.Fatalf("mariadbd exited with %v after shutdown\n%s", m.err, m.log())
	}
}

// The real thing: a loaded MariaDB 10.11 (glibc malloc, dozens of threads,
// one arena per 8 × CPU). info sees every arena, trim works, both borrow a
// single thread, the server goes on answering and nothing lands in its
// error log (gdb's recipe prints the XML to the server's stdout, which is
// err.log). Then info and trim run again while clients hammer the server:
// each either succeeds or refuses cleanly (no safe thread), never worse.
func TestMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and loads a real MariaDB server")
	}
	start := time.Now()
	m := startMariaDB(t)
	pid := m.cmd.Process.Pid
	if out, err := m.slap(64, 3, 20000).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-slap: %v\n%s", err, out)
	}
	t.Logf("server up and loaded in %s", time.Since(start).Round(time.Millisecond))

	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &cpus); err != nil {
		t.Fatal(err)
	}
	var info jsonInfo
	r := mustRun(t, "info", "--json", strconv.Itoa(pid))
	if err := decodeDoc([]byte(r.Stdout), &info); err != nil {
		t.Fatalf("info --json is not JSON: %v\n%s", err, r.Stdout)
	}
	// glibc 2.26+ caps the arenas at 8 per CPU of the affinity mask, and 64
	// clients reach the cap.
	if want := 8 * cpus.Count(); len(info.Arenas) != want {
		t.Errorf("info sees %d arenas, want 8 × %d CPUs = %d", len(info.Arenas), cpus.Count(), want)
	}
	if info.Injection == nil || info.Injection.StoppedUs <= 0 {
		t.Fatalf("no injection reported: %+v", info.Injection)
	}
	if info.Threads <= 10 {
		t.Errorf("mariadbd has %d threads, want more than 10", info.Threads)
	}
	t.Logf("info: %d threads, %d arenas, %d MiB from the system; borrowed %d (%s) for %d µs",
		info.Threads, len(info.Arenas), info.Totals.SystemCurrent>>20, info.Injection.Tid, info.Injection.Blocked, info.Injection.StoppedUs)

	var trim jsonTrim
	r = mustRun(t, "trim", "--json", strconv.Itoa(pid))
	if err := decodeDoc([]byte(r.Stdout), &trim); err != nil {
		t.Fatalf("trim --json is not JSON: %v\n%s", err, r.Stdout)
	}
	if trim.Result == nil || trim.ReleasedBytes == nil || trim.Injection == nil {
		t.Fatalf("trim --json lacks result, released_bytes or injection:\n%s", r.Stdout)
	}
	if *trim.Result != 0 && *trim.Result != 1 {
		t.Errorf("malloc_trim returned %d", *trim.Result)
	}
	t.Logf("trim: result %d, released %d KiB; held %d µs", *trim.Result, *trim.ReleasedBytes>>10, trim.Injection.StoppedUs)
	if !m.answers() {
		t.Fatalf("the server stopped answering after info and trim\n%s", m.log())
	}

	// Again, under load: mariadb-slap runs back to back in the background
	// for as long as info and trim run, so that every run meets a busy
	// server whatever the speed of the machine.
	stopLoad := m.load(32, 5000)
	ok, refused := 0, 0
	var stopped []string
	for i := 0; i < 10; i++ {
		verb := []string{"info", "trim"}[i%2]
		r := run(t, verb, "--json", strconv.Itoa(pid))
		switch r.Code {
		case 0:
			ok++
			var in struct {
				Injection jsonInjection `json:"injection"`
			}
			if err := decodeDoc([]byte(r.Stdout), &in); err != nil {
				t.Fatalf("%s --json under load is not JSON: %v\n%s", verb, err, r.Stdout)
			}
			stopped = append(stopped, fmt.Sprintf("%dµs", in.Injection.StoppedUs))
		case exitNoSafe:
			refused++
		default:
			t.Fatalf("%s under load: exit %d\n%s", verb, r.Code, r.Stderr)
		}
		if m.exited() {
			t.Fatalf("mariadbd died under %s: %v\n%s", verb, m.err, m.log())
		}
	}
	slaps, loadErr := stopLoad()
	if loadErr != nil {
		t.Errorf("the concurrent %v", loadErr)
	}
	t.Logf("under load (%d mariadb-slap runs meanwhile): %d succeeded (held %s), %d refused (no safe thread)",
		slaps, ok, strings.Join(stopped, " "), refused)
	if !m.answers() {
		t.Fatalf("the server stopped answering after info and trim under load\n%s", m.log())
	}
	if l := m.log(); strings.Contains(l, "<malloc") || strings.Contains(l, "<heap") {
		t.Errorf("malloc_info XML landed in the server's error log:\n%s", l)
	}
	m.stop()
	t.Logf("whole test: %s", time.Since(start).Round(time.Millisecond))
}

// The profiler on a loaded MariaDB: mariadbd answers throughout, the
// clients' load completes, its top stacks come out symbolized, and the
// sampler goes away.
func TestMariaDBLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and loads a real MariaDB server")
	}
	m := startMariaDB(t)
	pid := m.cmd.Process.Pid
	stopLoad := m.load(16, 2000)
	r := mustRun(t, "leaks", "--duration", "4s", "--rate", "64K", "--json", strconv.Itoa(pid))
	if _, err := stopLoad(); err != nil {
		t.Fatal(err)
	}
	var doc leaksDoc
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Samples == 0 || len(doc.Sites) == 0 || doc.Sampler.Kept != nil {
		t.Fatalf("%d samples, %d sites, kept %+v", doc.Samples, len(doc.Sites), doc.Sampler.Kept)
	}
	// Debian's mariadbd keeps its exported symbols only: its static
	// functions show as mariadbd+0x... without its debug package.
	named, frames, mysys := 0, 0, 0
	for _, s := range doc.Sites {
		for _, f := range s.Frames {
			frames++
			if f.Function != "" && !strings.Contains(f.Function, "+0x") && !strings.HasPrefix(f.Function, "0x") {
				named++
			}
			if f.Function == "my_malloc" || f.Function == "handle_one_connection" || strings.HasPrefix(f.Function, "THD::") {
				mysys++
			}
		}
	}
	if named < frames/3 || mysys == 0 {
		t.Errorf("%d of %d frames named, %d of MariaDB's own", named, frames, mysys)
	}
	top := doc.Sites[0]
	var chain []string
	for _, f := range top.Frames {
		chain = append(chain, f.Function)
	}
	t.Logf("%d samples, %d sites; top: %d bytes at %s (%s)", doc.Samples, len(doc.Sites), top.InuseSpace, top.AllocatedAt.Function, strings.Join(chain, " > "))
	if !m.answers() {
		t.Fatalf("mariadbd stopped answering\n%s", m.log())
	}
	m.stop()
}
