package stackprof_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
)

// TestServeFlameGraph serves the profile through pprof's web UI and has
// headless Chromium render the flame graph: the leaking functions must be
// drawn on it (the boxes are made by the page's script, so the DOM holds
// them only if the page really ran). Skipped when Chromium is absent.
func TestServeFlameGraph(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("chromium is not installed")
	}
	p := realProfile(t)
	web, err := stackprof.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- web.Serve(ctx, p) }()
	base := strings.TrimSuffix(web.URL(), "/ui/flamegraph")

	// The secret path's root leads to the flame graph, as pprof's own
	// server's root does.
	var resp *http.Response
	testutil.WaitUntil(t, "the web view to answer", func() bool {
		resp, err = http.Get(base + "/")
		return err == nil
	})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != web.URL() || !strings.Contains(string(body), "stackViewer(") {
		t.Fatalf("GET / ended at %s with %s", resp.Request.URL, resp.Status)
	}
	if r, err := http.Get(base + "/ui/nothing"); err != nil || r.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown page: %v %v", r, err)
	}

	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--window-size=1600,1000", "--virtual-time-budget=10000",
		"--dump-dom", base+"/ui/flamegraph")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := string(out)
	for _, fn := range []string{"make_widget", "reserve", "server::handle", "operator new", "realloc"} {
		box := regexp.MustCompile(`class="boxtext"[^>]*>` + regexp.QuoteMeta(htmlEscape(fn)) + `<`)
		if !box.MatchString(dom) {
			t.Errorf("no box for %s on the rendered flame graph", fn)
		}
	}
	if t.Failed() {
		t.Logf("DOM (%d bytes): %s", len(dom), dom[:min(len(dom), 4000)])
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	case <-time.After(testutil.Patience):
		t.Fatal("Serve did not return when its context ended")
	}
	if c, err := net.Dial("tcp", hostOf(t, base)); err == nil {
		c.Close()
		t.Error("still listening after Serve returned")
	}
}

func hostOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// TestServeBadAddress: an address that cannot be listened on is an
// error, at once.
func TestServeBadAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := stackprof.Listen(ln.Addr().String()); err == nil {
		t.Error("Listen on a port in use returned nil")
	}
	// Every interface is not loopback: the command warns about it.
	web, err := stackprof.Listen("0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	if web.Loopback() {
		t.Errorf("%s counts as loopback", web.URL())
	}
}

// TestServeGraphRunsNoUsersDot: pprof's graph view runs `dot` by name at
// each request; with a directory any user can write first in PATH, the
// view is left out and that directory's dot never runs (before, a request
// ran it as arenactl's user).
func TestServeGraphRunsNoUsersDot(t *testing.T) {
	p := realProfile(t)
	open := t.TempDir()
	os.Chmod(open, 0o777)
	ran := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\ntouch " + ran + "\ncat >/dev/null\necho '<svg></svg>'\n"
	if err := os.WriteFile(filepath.Join(open, "dot"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", open+string(filepath.ListSeparator)+os.Getenv("PATH"))
	web, err := stackprof.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if web.Graph() {
		t.Error("the graph view is served with a user's directory first in PATH")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- web.Serve(ctx, p) }()
	base := strings.TrimSuffix(web.URL(), "/ui/flamegraph")
	testutil.WaitUntil(t, "the web view to answer", func() bool {
		r, err := http.Get(web.URL())
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == http.StatusOK
	})
	r, err := http.Get(base + "/ui/graph")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Errorf("GET graph: %s", r.Status)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the dot in a directory any user can write ran")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestServeOnlyTheProfile: the web view answers only under its secret
// path, and there only with views of the profile: pprof's pages that open
// files (source, disassembly) or write its settings are not served, nor is
// anything but GET. An address without a host is loopback.
func TestServeOnlyTheProfile(t *testing.T) {
	p := realProfile(t)
	web, err := stackprof.Listen(":0")
	if err != nil {
		t.Fatal(err)
	}
	if !web.Loopback() || !strings.HasPrefix(web.URL(), "http://127.0.0.1:") {
		t.Errorf("--http :0 serves at %s (loopback %v)", web.URL(), web.Loopback())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- web.Serve(ctx, p) }()
	u := web.URL()
	base := strings.TrimSuffix(u, "/ui/flamegraph")
	host := hostOf(t, base)
	testutil.WaitUntil(t, "the web view to answer", func() bool {
		r, err := http.Get(u)
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == http.StatusOK
	})
	token := base[strings.LastIndex(base, "/")+1:]
	if len(token) < 32 {
		t.Errorf("the secret path %q is short", token)
	}
	for _, path := range []string{"/", "/ui/", "/ui/flamegraph", "/ui/top", "/ui/download", "/" + token[:len(token)-1] + "/ui/flamegraph",
		"/" + strings.ToUpper(token) + "/ui/flamegraph", "/x" + token + "/ui/flamegraph", "/ui/" + token + "/flamegraph"} {
		r, err := http.Get("http://" + host + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusNotFound && r.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s without the secret path: %s", path, r.Status)
		}
	}
	for _, page := range []string{"top", "graph", "peek?f=.", "download"} {
		r, err := http.Get(base + "/ui/" + page)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		// graph needs the system's Graphviz dot: left out without it.
		if r.StatusCode != http.StatusOK && !(page == "graph" && !web.Graph() && r.StatusCode == http.StatusNotFound) {
			t.Errorf("GET %s: %s", page, r.Status)
		}
	}
	for _, page := range []string{"source?f=.", "disasm?f=.", "saveconfig?config=x", "deleteconfig?config=x"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, _ := http.NewRequest(method, base+"/ui/"+page, nil)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s: %s", method, page, r.Status)
			}
		}
	}
	if r, err := http.Post(base+"/ui/flamegraph", "text/plain", nil); err != nil || r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST flamegraph: %v %v", r, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
