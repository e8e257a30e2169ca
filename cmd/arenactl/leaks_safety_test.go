package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// leaksStarted runs arenactl leaks with args (the PID last) and reads its
// stderr until a line holds want, which it returns; the rest of stderr is
// copied to said. The command is killed when the test ends.
func leaksStarted(t *testing.T, cmd *exec.Cmd, want string, said *strings.Builder) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), want) {
			go io.Copy(io.Discard, stderr)
			return lines.Text()
		}
	}
	cmd.Wait()
	t.Fatalf("arenactl leaks never said %q: %s", want, said.String())
	return ""
}

// TestLeaksHTTPServesOnlyTheProfile: leaks --http serves, as root, the
// profile of a process whose DWARF places the leaking function in a file
// only root can read (#line 1 "SECRET"). No page shows that file's text,
// pprof's settings are never written (saveconfig), and nothing at all is
// served without the secret path arenactl prints.
func TestLeaksHTTPServesOnlyTheProfile(t *testing.T) {
	dir := t.TempDir()
	var b [8]byte
	rand.Read(b[:])
	mark := "ARENACTL-SECRET-" + hex.EncodeToString(b[:])
	secret := filepath.Join(dir, "secret.txt")
	var text strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&text, "%s line %d\n", mark, i)
	}
	if err := os.WriteFile(secret, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := testutil.BuildC(t, "secretline.c", "-O2", fmt.Sprintf(`-DSECRET_FILE="%s"`, secret))
	tg := testutil.Start(t, bin)

	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o700)
	cmd := exec.Command(arenactl, "leaks", "--duration", "1s", "--rate", "16K", "--http", "127.0.0.1:0", fmt.Sprint(tg.Pid))
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	// A file, not a pipe: what arenactl printed before it serves is
	// there when it says it serves.
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = out
	var said strings.Builder
	line := leaksStarted(t, cmd, "serving the profile at ", &said)
	_, u, _ := strings.Cut(line, "serving the profile at ")
	u, _, _ = strings.Cut(u, " ")
	base, ok := strings.CutSuffix(u, "/ui/flamegraph")
	if !ok {
		t.Fatalf("served at %q", u)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if table, _ := os.ReadFile(out.Name()); !strings.Contains(string(table), "secret_leak") {
		t.Fatalf("the profile has no secret_leak site:\n%s", table)
	}

	get := func(method, u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, u, nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer r.Body.Close()
		body, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(body)
	}
	// Every page pprof has, with the queries that name the function.
	pages := []string{"", "flamegraph", "top", "graph", "peek?f=secret_leak", "source?f=secret_leak", "source?f=.*",
		"disasm?f=secret_leak", "download", "flamegraph?f=secret_leak&g=lines"}
	for _, page := range pages {
		for _, prefix := range []string{base + "/ui/", "http://" + pu.Host + "/ui/", "http://" + pu.Host + "/"} {
			code, body := get(http.MethodGet, prefix+page)
			if strings.Contains(body, mark) {
				t.Errorf("GET %s (%d) shows the root-only file's text", prefix+page, code)
			}
			if prefix != base+"/ui/" && code != http.StatusNotFound && code != http.StatusForbidden {
				t.Errorf("GET %s without the secret path: %d", prefix+page, code)
			}
		}
	}
	if code, body := get(http.MethodGet, base+"/ui/top"); code != http.StatusOK || !strings.Contains(body, "secret_leak") {
		t.Errorf("the top page: %d, secret_leak there: %v", code, strings.Contains(body, "secret_leak"))
	}
	for _, page := range []string{"saveconfig?config=mine&f=x", "deleteconfig?config=mine"} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			for _, prefix := range []string{base + "/ui/", "http://" + pu.Host + "/ui/"} {
				if code, _ := get(method, prefix+page); code != http.StatusNotFound {
					t.Errorf("%s %s: %d", method, prefix+page, code)
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "pprof")); err == nil {
		t.Errorf("pprof's settings were written under %s", home)
	}

	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("arenactl leaks --http after SIGINT: %v\n%s", err, said.String())
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}
