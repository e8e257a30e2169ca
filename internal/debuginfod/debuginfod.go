// Package debuginfod owns fetching a module's separate debug file by its
// build-id from debuginfod servers (elfutils' protocol: GET
// URL/buildid/BUILDID/debuginfo), the way gdb, perf and elfutils' own
// client do on a distribution that runs such servers for its packages.
// Production servers are stripped and their debug packages seldom
// installed; with their debug files, growth's and leaks' stacks name
// functions and lines instead of offsets.
//
// It follows elfutils' client conventions so that a machine set up for gdb
// works as it is: DEBUGINFOD_URLS (space-separated; unset or empty: off,
// nothing is fetched), DEBUGINFOD_CACHE_PATH (else
// $XDG_CACHE_HOME/debuginfod_client, else ~/.cache/debuginfod_client) laid
// out as CACHE/BUILDID/debuginfo, DEBUGINFOD_TIMEOUT (seconds without
// progress), DEBUGINFOD_MAXSIZE (bytes) and DEBUGINFOD_MAXTIME (seconds for
// one file). Its defaults are tighter than elfutils' (Timeout, MaxSize,
// MaxTime), since arenactl runs on the server: a fetch is bounded in time
// and size, and a server's answer is a file read as untrusted input
// (checked to be an ELF file with that build-id and DWARF before it is kept).
//
// arenactl runs as root while other users share the machine: the cache
// directory must be arenactl's own, reached through directories no other
// user can change (Client.checkCache), or nothing is fetched.
package debuginfod

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/arenactl/arenactl/internal/module"
)

// Defaults where the environment says nothing.
const (
	Timeout = 10 * time.Second // without a byte received
	MaxTime = 60 * time.Second // for one file
	MaxSize = 1 << 30          // bytes of one file
)

// Client fetches debug files into a cache.
type Client struct {
	URLs    []string
	Cache   string
	Timeout time.Duration
	MaxTime time.Duration
	MaxSize int64
	http    *http.Client
}

// FromEnv is the client the environment configures, nil when
// DEBUGINFOD_URLS is unset or empty.
func FromEnv() (*Client, error) {
	urls := strings.Fields(os.Getenv("DEBUGINFOD_URLS"))
	if len(urls) == 0 {
		return nil, nil
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, &Error{What: fmt.Sprintf("DEBUGINFOD_URLS: %q is not an http or https URL", u)}
		}
	}
	c := &Client{URLs: urls, Timeout: Timeout, MaxTime: MaxTime, MaxSize: MaxSize}
	if d := os.Getenv("DEBUGINFOD_CACHE_PATH"); d != "" {
		c.Cache = d
	} else if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		c.Cache = filepath.Join(d, "debuginfod_client")
	} else if home, err := os.UserHomeDir(); err == nil {
		c.Cache = filepath.Join(home, ".cache", "debuginfod_client")
	} else {
		return nil, &Error{What: "no cache directory: set DEBUGINFOD_CACHE_PATH"}
	}
	for _, v := range []struct {
		env string
		d   *time.Duration
	}{{"DEBUGINFOD_TIMEOUT", &c.Timeout}, {"DEBUGINFOD_MAXTIME", &c.MaxTime}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				return nil, &Error{What: fmt.Sprintf("%s=%q is not a number of seconds above 0", v.env, s)}
			}
			*v.d = time.Duration(n) * time.Second
		}
	}
	if s := os.Getenv("DEBUGINFOD_MAXSIZE"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return nil, &Error{What: fmt.Sprintf("DEBUGINFOD_MAXSIZE=%q is not a number of bytes above 0", s)}
		}
		c.MaxSize = n
	}
	return c, nil
}

// Error is a failure to fetch or keep a debug file.
type Error struct {
	BuildID string
	What    string
	Err     error
}

func (e *Error) Error() string {
	s := "debuginfod"
	if e.BuildID != "" {
		s += " " + e.BuildID
	}
	s += ": " + e.What
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// ErrNotFound: no server has the build-id.
var ErrNotFound = errors.New("no server has it")

// Path is where the cache keeps buildID's debug file.
func (c *Client) Path(buildID string) string {
	return filepath.Join(c.Cache, buildID, "debuginfo")
}

// Fetch returns the path of buildID's debug file: the cache's when it is
// there, else the first server's that has it, checked and then kept in the
// cache.
func (c *Client) Fetch(ctx context.Context, buildID string) (string, error) {
	if !validBuildID(buildID) {
		return "", &Error{BuildID: buildID, What: "not a build-id"}
	}
	if err := c.checkCache(); err != nil {
		return "", err
	}
	p := c.Path(buildID)
	if err := checkFile(p, buildID); err == nil {
		return p, nil
	}
	var last error = &Error{BuildID: buildID, What: "fetching", Err: ErrNotFound}
	for _, u := range c.URLs {
		err := c.fetchFrom(ctx, strings.TrimSuffix(u, "/")+"/buildid/"+buildID+"/debuginfo", buildID)
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !errors.Is(err, ErrNotFound) || !errors.Is(last, ErrNotFound) {
			last = err
		}
	}
	return "", last
}

func (c *Client) fetchFrom(ctx context.Context, url, buildID string) error {
	ctx, cancel := context.WithTimeout(ctx, c.MaxTime)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return &Error{BuildID: buildID, What: "request", Err: err}
	}
	hc := c.http
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: c.Timeout}}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &Error{BuildID: buildID, What: "GET " + url, Err: err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return &Error{BuildID: buildID, What: "GET " + url, Err: ErrNotFound}
	case resp.StatusCode != http.StatusOK:
		return &Error{BuildID: buildID, What: "GET " + url + ": " + resp.Status}
	case resp.ContentLength > c.MaxSize:
		return &Error{BuildID: buildID, What: fmt.Sprintf("%s is %d bytes, over DEBUGINFOD_MAXSIZE %d", url, resp.ContentLength, c.MaxSize)}
	}
	dir := filepath.Join(c.Cache, buildID)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return &Error{BuildID: buildID, What: "cache", Err: err}
	}
	if err := ownDir(dir); err != nil {
		return &Error{BuildID: buildID, What: "cache", Err: err}
	}
	f, err := os.CreateTemp(dir, ".partial-")
	if err != nil {
		return &Error{BuildID: buildID, What: "cache", Err: err}
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// Each read must bring a byte within Timeout.
	body := &stallReader{r: resp.Body, timeout: c.Timeout, cancel: cancel}
	n, err := io.Copy(f, io.LimitReader(body, c.MaxSize+1))
	if err != nil {
		return &Error{BuildID: buildID, What: "GET " + url, Err: err}
	}
	if n > c.MaxSize {
		return &Error{BuildID: buildID, What: fmt.Sprintf("%s is over DEBUGINFOD_MAXSIZE %d bytes", url, c.MaxSize)}
	}
	if err := f.Close(); err != nil {
		return &Error{BuildID: buildID, What: "cache", Err: err}
	}
	if err := checkFile(f.Name(), buildID); err != nil {
		return &Error{BuildID: buildID, What: "the file " + url + " served", Err: err}
	}
	if err := os.Rename(f.Name(), c.Path(buildID)); err != nil {
		return &Error{BuildID: buildID, What: "cache", Err: err}
	}
	return nil
}

// stallReader fails a read that brings nothing within timeout, by
// cancelling the request: one timer, pushed back by every read.
type stallReader struct {
	r       io.Reader
	timeout time.Duration
	cancel  context.CancelFunc
	timer   *time.Timer
}

func (s *stallReader) Read(p []byte) (int, error) {
	if s.timer == nil {
		s.timer = time.AfterFunc(s.timeout, s.cancel)
	} else {
		s.timer.Reset(s.timeout)
	}
	n, err := s.r.Read(p)
	s.timer.Stop()
	return n, err
}

func validBuildID(id string) bool {
	if len(id) < 2 || len(id) > 128 || len(id)%2 != 0 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkFile accepts a regular file of ours (no link) that is an ELF file
// with buildID and DWARF.
func checkFile(path, buildID string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || !owned(fi) {
		return fmt.Errorf("%s is not a regular file of arenactl's user", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return err
	}
	if s := ef.Section(".debug_info"); s == nil || s.Type == elf.SHT_NOBITS {
		return errors.New("no DWARF in it")
	}
	if id := module.BuildIDOf(ef); id != buildID {
		return fmt.Errorf("its build-id is %q", id)
	}
	return nil
}
