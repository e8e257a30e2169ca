package stackprof

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/driver"
	"github.com/google/pprof/profile"
)

// Web is pprof's own web UI over one profile, served to whoever has its
// URL and nobody else.
//
// pprof's server is made for a developer's own profile on their own
// machine; arenactl serves, often as root, a profile whose file names come
// from the target's DWARF, which the target's owner (any local user)
// writes. So, unlike pprof's:
//   - only the views of the profile itself are routed (flame graph, top,
//     graph, peek, the profile's download). pprof's source and disassembly
//     views open the files the profile names (a `#line 1 "/root/secret"`
//     in the target's source is enough) and its saveconfig/deleteconfig
//     write the serving user's ~/.config/pprof/settings.json: they are not
//     routed, and the driver is given no object tool, symbolizer or writer
//     that could open a file should a view try;
//   - every page is under a random path of 128 bits (as notebook servers'
//     tokens are), printed to the user in URL: any local user can connect
//     to a loopback port, so binding to loopback alone keeps nobody out;
//   - an address with no host is bound to loopback, as pprof's -http does.
//   - the graph view, for which pprof runs Graphviz's dot, is served only
//     when the dot arenactl's PATH finds is the system's (see graphviz);
//     otherwise it is left out.
type Web struct {
	ln    net.Listener
	token string
	dot   string // what the graph view runs, decided at Listen; "": no graph view
}

// Listen opens addr (host:port; port 0 picks one; no host: 127.0.0.1) for
// the web UI and draws its secret path.
func Listen(addr string) (*Web, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	return &Web{ln: ln, token: hex.EncodeToString(b[:]), dot: graphView()}, nil
}

// Graph says whether the graph view is served (see graphviz).
func (w *Web) Graph() bool { return w.dot != "" }

// URL is the flame graph's address, secret path included.
func (w *Web) URL() string {
	return "http://" + w.ln.Addr().String() + "/" + w.token + "/ui/flamegraph"
}

// Loopback says whether only this machine can connect.
func (w *Web) Loopback() bool {
	a, ok := w.ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// Close closes the listener (Serve does when it returns).
func (w *Web) Close() error { return w.ln.Close() }

// Serve serves the profile until ctx ends, and closes the listener.
func (w *Web) Serve(ctx context.Context, p *Profile) error {
	return w.serveProto(ctx, p.Proto(), "arenactl-leaks")
}

// serveProto serves pp, named name in pprof's pages, with the views and
// the secret path Serve promises, until ctx ends; it closes the listener.
func (w *Web) serveProto(ctx context.Context, pp *profile.Profile, name string) error {
	defer w.ln.Close()
	ui := &quietUI{}
	served := false
	err := driver.PProf(&driver.Options{
		Flagset: &fixedFlags{FlagSet: flag.NewFlagSet("pprof", flag.ContinueOnError),
			args: []string{"-http=" + w.ln.Addr().String(), "-no_browser", "-symbolize=none", name}},
		Fetch:  fetcher{pp},
		UI:     ui,
		Obj:    noFiles{},
		Sym:    noFiles{},
		Writer: noWriter{},
		HTTPServer: func(args *driver.HTTPServerArgs) error {
			served = true
			return w.serveUntil(ctx, args)
		},
	})
	if err != nil {
		return fmt.Errorf("web view: %w", err)
	}
	if !served {
		// pprof gave up before serving and said why only to its UI.
		return fmt.Errorf("web view: pprof did not serve: %s", ui.errors())
	}
	return nil
}

// served are the pprof handlers routed: views of the profile alone. Not
// /source and /disasm (they open files the profile names), nor /saveconfig
// and /deleteconfig (they write the serving user's pprof settings).
var served = map[string]bool{"/": true, "/flamegraph": true, "/top": true, "/graph": true, "/peek": true, "/download": true}

// serveUntil is pprof's default web server (the UI under /ui/, only local
// clients when bound to a loopback address) behind the secret path, on our
// listener, ending with ctx.
func (w *Web) serveUntil(ctx context.Context, args *driver.HTTPServerArgs) error {
	local := w.Loopback()
	prefix := "/" + w.token
	h := http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if local {
			host, _, err := net.SplitHostPort(req.RemoteAddr)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				http.Error(rw, "permission denied", http.StatusForbidden)
				return
			}
		}
		// The token is compared in constant time, and a wrong one gets
		// the answer of a page that does not exist.
		first, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
		if subtle.ConstantTimeCompare([]byte(first), []byte(w.token)) != 1 {
			http.NotFound(rw, req)
			return
		}
		switch {
		case rest == "" || rest == "ui":
			http.Redirect(rw, req, prefix+"/ui/", http.StatusTemporaryRedirect)
			return
		case !strings.HasPrefix(rest, "ui/"):
			http.NotFound(rw, req)
			return
		}
		page := strings.TrimPrefix(rest, "ui")
		if !served[page] || args.Handlers[page] == nil || page == "/graph" && w.dot == "" {
			http.NotFound(rw, req)
			return
		}
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			http.Error(rw, "only GET", http.StatusMethodNotAllowed)
			return
		}
		req.URL.Path = page
		req.URL.RawPath = ""
		args.Handlers[page].ServeHTTP(rw, req)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			srv.Close()
		case <-done:
		}
	}()
	if err := srv.Serve(w.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// noFiles is the driver's object tool, symbolizer and writer: none opens a
// file (see Web).
type noFiles struct{}

var errNoFiles = errors.New("arenactl's web view opens no file")

func (noFiles) Open(string, uint64, uint64, uint64, string) (driver.ObjFile, error) {
	return nil, errNoFiles
}
func (noFiles) Disasm(string, uint64, uint64, bool) ([]driver.Inst, error) { return nil, errNoFiles }
func (noFiles) Symbolize(string, driver.MappingSources, *profile.Profile) error {
	return nil // the profile is symbolized already
}

type noWriter struct{}

func (noWriter) Open(string) (io.WriteCloser, error) { return nil, errNoFiles }

// fetcher hands pprof the profile, whatever source it names; with no
// source URL pprof keeps no copy of it.
type fetcher struct{ p *profile.Profile }

func (f fetcher) Fetch(string, time.Duration, time.Duration) (*profile.Profile, string, error) {
	return f.p.Copy(), "", nil
}

// fixedFlags is pprof's command line, fixed: it is not arenactl's.
type fixedFlags struct {
	*flag.FlagSet
	args []string
}

func (f *fixedFlags) StringList(name, def, usage string) *[]*string {
	return &[]*string{f.FlagSet.String(name, def, usage)}
}

func (f *fixedFlags) ExtraUsage() string   { return "" }
func (f *fixedFlags) AddExtraUsage(string) {}

func (f *fixedFlags) Parse(usage func()) []string {
	f.FlagSet.SetOutput(io.Discard)
	if err := f.FlagSet.Parse(f.args); err != nil {
		usage()
		return nil
	}
	return f.FlagSet.Args()
}

// quietUI keeps pprof from talking on arenactl's terminal: what it prints
// ("Serving web UI on ...") is the caller's to say, and its errors are
// kept for the error Serve returns.
type quietUI struct {
	mu   sync.Mutex
	errs []string
}

func (u *quietUI) ReadLine(string) (string, error) { return "", io.EOF }
func (u *quietUI) Print(...any)                    {}
func (u *quietUI) PrintErr(args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.errs = append(u.errs, strings.TrimSpace(fmt.Sprint(args...)))
}
func (u *quietUI) IsTerminal() bool                    { return false }
func (u *quietUI) WantBrowser() bool                   { return false }
func (u *quietUI) SetAutoComplete(func(string) string) {}

func (u *quietUI) errors() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.errs) == 0 {
		return "no reason given"
	}
	return strings.Join(u.errs, "; ")
}
