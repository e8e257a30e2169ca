package testutil

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Debuginfod runs elfutils' debuginfod server (Debian's debuginfod package)
// over the debug files in dir, on a free loopback port, until the test
// ends, and returns its URL once it serves buildID (a file of dir's). The
// test is skipped when the server is not installed.
func Debuginfod(t testing.TB, dir, buildID string) string {
	t.Helper()
	bin, err := exec.LookPath("debuginfod")
	if err != nil {
		t.Skip("debuginfod is not installed (Debian's debuginfod package)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-F", "-p", fmt.Sprint(port), "-d", filepath.Join(t.TempDir(), "db.sqlite"), "-t", "1", dir)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(Patience)
	for {
		resp, err := http.Get(url + "/buildid/" + buildID + "/debuginfo")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("debuginfod never served %s: %v\n%s", buildID, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockedBuffer collects a process's output from its two pipes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
