package heapprof

import (
	"context"
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

// Serve serves pprof's own web UI over the profile at addr (host:port;
// port 0 picks one) until ctx ends. The flame graph is at /ui/flamegraph.
func Serve(ctx context.Context, addr string, p *Profile) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("web view: %w", err)
	}
	return ServeListener(ctx, ln, p)
}

// ServeListener is Serve on a listener the caller opened (and so knows the
// address of, to print it). It closes ln.
func ServeListener(ctx context.Context, ln net.Listener, p *Profile) error {
	defer ln.Close()
	pp := p.Proto()
	ui := &quietUI{}
	served := false
	err := driver.PProf(&driver.Options{
		Flagset: &fixedFlags{FlagSet: flag.NewFlagSet("pprof", flag.ContinueOnError),
			args: []string{"-http=" + ln.Addr().String(), "-no_browser", "-symbolize=none", "arenactl-leaks"}},
		Fetch: fetcher{pp},
		UI:    ui,
		HTTPServer: func(args *driver.HTTPServerArgs) error {
			served = true
			return serveUntil(ctx, ln, args)
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

// serveUntil is pprof's default web server (the UI under /ui/, the root
// redirected there; only local clients when bound to a loopback address)
// on our listener, ending with ctx.
func serveUntil(ctx context.Context, ln net.Listener, args *driver.HTTPServerArgs) error {
	local := false
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		local = a.IP.IsLoopback()
	}
	ui := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if local {
			host, _, err := net.SplitHostPort(req.RemoteAddr)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				http.Error(w, "permission denied", http.StatusForbidden)
				return
			}
		}
		h := args.Handlers[req.URL.Path]
		if h == nil {
			http.NotFound(w, req)
			return
		}
		h.ServeHTTP(w, req)
	})
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", ui))
	mux.Handle("/", http.RedirectHandler("/ui/", http.StatusTemporaryRedirect))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			srv.Close()
		case <-done:
		}
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

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
