package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// ReadSummary reads an info --json document, or the last of the documents
// (JSON lines of watch --json) a file holds, as the summary diff compares.
func ReadSummary(path string) (*report.Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	var last *WatchSample
	for {
		var doc WatchSample
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not JSON written by arenactl info --json or watch --json: %w", path, err)
		}
		last = &doc
	}
	switch {
	case last == nil:
		return nil, fmt.Errorf("%s: empty: no arenactl info --json document in it", path)
	case len(last.Arenas) == 0:
		return nil, fmt.Errorf("%s: not written by arenactl info --json or watch --json: it has no arenas", path)
	case last.SchemaVersion > Version:
		// Version 0: written before documents carried their version.
		return nil, fmt.Errorf("%s: schema version %d, newer than this arenactl's (%d)", path, last.SchemaVersion, Version)
	}
	s, err := last.summary()
	if err != nil {
		return nil, fmt.Errorf("%s: not written by arenactl watch --json: %w", path, err)
	}
	s.Source = path
	return s, nil
}

// summary is what diff compares of the document.
func (d *WatchSample) summary() (*report.Summary, error) {
	s := &report.Summary{Pid: d.Pid, Exe: d.Exe, Glibc: d.Libc.Version, SystemCurrent: d.Totals.SystemCurrent, MmapBytes: d.Totals.MmapBytes}
	if d.Time != "" {
		at, err := time.Parse(time.RFC3339Nano, d.Time)
		if err != nil {
			return nil, fmt.Errorf("its time: %w", err)
		}
		s.Sample = &report.Sample{Index: d.Sample, Time: at}
	}
	for _, a := range d.Arenas {
		m := report.ArenaMeasures{Index: a.Index, Main: a.Main, SystemCurrent: a.SystemCurrent, InUse: a.InUseBytes, Free: a.FreeBytes,
			Rest: a.RestBytes, Fast: a.FastBytes}
		if w := a.Walk; w != nil {
			m.Addr, m.Tcache = w.Addr, &w.TcacheBytes
		}
		s.Arenas = append(s.Arenas, m)
	}
	// A kernel core's counters are null (unknown): compared as 0, and
	// said to be unknown.
	p := d.Maps.Process
	s.Unmeasured = p.Rss == nil
	s.Rollup.Rss, s.Rollup.Pss, s.Rollup.PrivateDirty, s.Rollup.PrivateClean, s.Rollup.Anonymous, s.Rollup.Swap =
		deref(p.Rss), deref(p.Pss), deref(p.PrivateDirty), deref(p.PrivateClean), deref(p.Anonymous), deref(p.Swap)
	for _, c := range d.Maps.Classes {
		s.Classes = append(s.Classes, report.ClassMeasures{Class: c.Class, Count: c.Count, Size: c.Size, Rss: deref(c.Rss), Pss: deref(c.Pss),
			PrivateDirty: deref(c.PrivateDirty), Swap: deref(c.Swap)})
	}
	for _, f := range d.Findings {
		s.Findings = append(s.Findings, f.model())
	}
	return s, nil
}
