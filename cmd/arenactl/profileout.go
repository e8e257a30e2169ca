package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// profileOutputs are -o and --http of the commands that take a profile
// over a window (leaks, growth), opened before the window: a path that
// cannot be written, or an address that cannot be listened on, is refused
// at once, not after the whole window, with the profile lost.
type profileOutputs struct {
	cmd  string         // the command's name, for -o's refusals
	path string         // -o's
	out  *hostfs.Output // nil without -o
	web  *stackprof.Web // nil without --http
}

func openProfileOutputs(cmd, path, addr string) (_ *profileOutputs, err error) {
	p := &profileOutputs{cmd: cmd, path: path}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if path != "" {
		if p.out, err = hostfs.CreateOutput(path); err != nil {
			return nil, profileOutputErr(cmd, path, err)
		}
	}
	if addr != "" {
		if p.web, err = stackprof.Listen(addr); err != nil {
			return nil, &usageError{msg: fmt.Sprintf("--http %s: %v", addr, err)}
		}
		if !p.web.Loopback() {
			// Said before the window, so that it can be ended before
			// anything is done to the process.
			fmt.Fprintf(os.Stderr, "arenactl: WARNING: --http %s is reachable from other machines: anyone who can reach it and learns the URL printed at the end sees the profile (function and file names of the process); use 127.0.0.1:PORT and an SSH tunnel instead\n", addr)
		}
	}
	return p, nil
}

// print writes the profile to -o's file (save) and commits it, then prints
// the run to stdout (show, buffered); a table (not JSON or folded stacks)
// ends with where the profile went. A failed write to stdout (EPIPE: the
// reader went away) is the command's error: main tells it by it.
func (p *profileOutputs) print(save, show func(io.Writer) error, table bool) (err error) {
	if p.out != nil {
		if err := save(p.out.File); err != nil {
			return profileOutputErr(p.cmd, p.path, err)
		}
		if err := p.out.Commit(); err != nil {
			return profileOutputErr(p.cmd, p.path, err)
		}
	}
	w := bufio.NewWriter(os.Stdout)
	defer func() {
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
	}()
	if err := show(w); err != nil || !table || p.path == "" {
		return err
	}
	fmt.Fprintf(w, "profile written to %s (go tool pprof %s)\n", p.path, p.path)
	return nil
}

// close drops a -o file not committed and stops listening.
func (p *profileOutputs) close() {
	if p.out != nil {
		p.out.Discard()
	}
	if p.web != nil {
		p.web.Close()
	}
}

// serve serves the profile with --http once the window is over, until the
// next interrupt (the one that ended an interrupted window is spent). The
// URL holds the secret path (stackprof.Web): without it every request is
// refused.
func (p *profileOutputs) serve(serve func(context.Context, *stackprof.Web) error) error {
	if p.web == nil {
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), interrupts...)
	defer stop()
	if !p.web.Graph() {
		fmt.Fprintln(os.Stderr, "arenactl: no graph view: it runs Graphviz's dot, and PATH does not find /usr/bin/dot or /usr/local/bin/dot through directories only root can write")
	}
	fmt.Fprintf(os.Stderr, "arenactl: serving the profile at %s until interrupted (Ctrl-C); the URL is the password: do not share it\n", p.web.URL())
	return serve(ctx, p.web)
}
