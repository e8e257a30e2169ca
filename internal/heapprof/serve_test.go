package heapprof_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/heapprof"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- heapprof.ServeListener(ctx, ln, p) }()
	base := "http://" + ln.Addr().String()

	// The root leads to the flame graph, as pprof's own server does.
	var resp *http.Response
	testutil.WaitUntil(t, "the web view to answer", func() bool {
		resp, err = http.Get(base + "/")
		return err == nil
	})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/flamegraph" || !strings.Contains(string(body), "stackViewer(") {
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
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("still listening after Serve returned")
	}
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
	if err := heapprof.Serve(context.Background(), ln.Addr().String(), &heapprof.Profile{}); err == nil {
		t.Error("Serve on a port in use returned nil")
	}
}
