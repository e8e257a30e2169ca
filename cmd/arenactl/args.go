package main

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// parsePidText reads a process id as the kernel prints one: decimal
// digits only. strconv.Atoi alone took "+5" for process 5.
func parsePidText(s string) (int, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	pid, err := strconv.Atoi(s)
	return pid, err == nil && pid > 0
}

// parseSize reads a byte count as every size flag takes it (--pad,
// --min-change, --rate, --max-unpacked): decimal digits, optionally
// followed by K, M, G or T (powers of 1024) and B or iB: 4096, 64K, 64KiB,
// 1M, 32G.
func parseSize(s string) (uint64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(s), "ib"), "b")
	mult := uint64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("kmgt", t[n-1]); i >= 0 {
			mult, t = 1<<(10*(i+1)), t[:n-1]
		}
	}
	if t == "" || strings.TrimLeft(t, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a size such as 4096, 64K or 1M", s)
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size such as 4096, 64K or 1M", s)
	}
	return n * mult, nil
}

// byteCount is a size flag that may be 0 (--pad, --min-change).
type byteCount uint64

func (v *byteCount) String() string { return strconv.FormatUint(uint64(*v), 10) }
func (v *byteCount) Type() string   { return "SIZE" }
func (v *byteCount) Set(s string) error {
	n, err := parseSize(s)
	*v = byteCount(n)
	return err
}

// checkDurations refuses a negative duration flag, and a --timeout that is
// not above 0: '--timeout -1s' ran and failed as 'did not stop' (exit 1).
func checkDurations(c *cobra.Command) error {
	var bad error
	c.Flags().Visit(func(f *pflag.Flag) {
		if bad != nil || f.Value.Type() != "duration" {
			return
		}
		d, err := time.ParseDuration(f.Value.String())
		switch {
		case err != nil:
		case d < 0:
			bad = &usageError{msg: fmt.Sprintf("--%s %s: a duration cannot be negative", f.Name, f.Value)}
		case d == 0 && f.Name == "timeout":
			bad = &usageError{msg: "--timeout must be above 0"}
		}
	})
	return bad
}

// rangeKey is the annotation of a numeric flag that holds the values it
// accepts: its lowest, its highest (each in the flag's own syntax), and
// the range in words for the refusal.
const rangeKey = "arenactl-range"

// limit gives c's numeric flag name the values it accepts, from lo to hi
// inclusive (in the flag's own syntax: "8", "64K", "1ms"); what is the
// range as the refusal says it. checkLimits refuses any value outside it
// before the command runs: perf_event_open's EINVAL after the target was
// set up ("--stack 100K"), a size silently cut to 32 bits ("--stack 1T").
func limit(c *cobra.Command, name, lo, hi, what string) {
	fl := c.Flags()
	if c.PersistentFlags().Lookup(name) != nil {
		fl = c.PersistentFlags()
	}
	if err := fl.SetAnnotation(name, rangeKey, []string{lo, hi, what}); err != nil {
		panic(err) // a flag that is not there: a mistake in this file
	}
}

// numericTypes are the pflag types of the flags that must have a limit.
var numericTypes = map[string]bool{"int": true, "uint": true, "uint64": true, "int64": true, "float64": true, "duration": true, "SIZE": true}

// number reads v, a value of a flag of type typ, for comparison.
func number(typ, v string) (*big.Float, bool) {
	switch typ {
	case "duration":
		d, err := time.ParseDuration(v)
		return new(big.Float).SetInt64(int64(d)), err == nil
	case "SIZE":
		if v == "" { // sizeValue's 0
			return new(big.Float), true
		}
		n, err := parseSize(v)
		return new(big.Float).SetUint64(n), err == nil
	}
	f, ok := new(big.Float).SetPrec(128).SetString(v)
	return f, ok
}

// checkLimits refuses a value given to a flag of c that is outside its
// limit: one line naming the flag, the value and the range.
func checkLimits(c *cobra.Command) error {
	var bad error
	c.Flags().Visit(func(f *pflag.Flag) {
		r, ok := f.Annotations[rangeKey]
		if bad != nil || !ok {
			return
		}
		typ := f.Value.Type()
		v, ok := number(typ, f.Value.String())
		lo, _ := number(typ, r[0])
		hi, _ := number(typ, r[1])
		if !ok || v.Cmp(lo) < 0 || v.Cmp(hi) > 0 {
			bad = &usageError{msg: fmt.Sprintf("--%s %s: give %s", f.Name, f.Value, r[2])}
		}
	})
	return bad
}

// Highest values that are only bounded by what the flag's type holds.
const (
	maxInt  = "9223372036854775807"
	maxSize = "4194304T" // parseSize's most: 2^62 bytes
	maxWait = "8760h"    // a year: longer is a mistake, not a plan
)

// setLimits gives every numeric flag of every command under root its
// range (TestEveryNumericFlagLimited keeps it so).
func setLimits(root *cobra.Command) {
	for _, c := range root.Commands() {
		has := func(name string) bool { return c.Flags().Lookup(name) != nil }
		set := func(name, lo, hi, what string) {
			if has(name) {
				limit(c, name, lo, hi, what)
			}
		}
		// Every stop and every call arenactl waits for is bounded by it:
		// an hour is long past any use.
		set("timeout", "1ns", "1h", "a duration above 0, at most 1h")
		set("thread", "0", "2147483647", "a thread id of the process, or 0 to let arenactl choose")
		set("max-unpacked", "1", maxSize, "a size above 0 such as 32G")
		set("pad", "0", maxSize, "a size such as 0, 128K or 1M")
		set("min-change", "0", maxSize, "a size such as 0, 64K or 1M")
		set("count", "0", maxInt, "0 (until interrupted) or a number of samples")
		if c.Name() == "record" {
			// Its intervals end at the sampler's drains, at most 100 ms
			// apart when little is allocated.
			set("interval", "100ms", maxWait, "a duration from 100ms to "+maxWait)
		} else {
			set("interval", "1ms", maxWait, "a duration from 1ms to "+maxWait)
		}
		set("duration", "0", maxWait, "0 (until interrupted) or a duration up to "+maxWait)
		set("min-age", "0", maxWait, "a duration from 0 to "+maxWait)
		set("rate", "1", maxSize, "a size of at least 1 byte such as 512K")
		if c.Name() == "heap" {
			set("top", "1", maxInt, "1 or more types")
		} else {
			set("top", "0", maxInt, "0 (all) or a number of sites")
		}
		// perf_event_open takes a sample period below 2^63
		// (kernel/events/core.c, perf_copy_attr), and a stack copy
		// below 64K, in whole words (sample_stack_user).
		set("period", "1", maxInt, "a number of faults from 1 to 2^63-1")
		set("stack", "8", "65528", "a size from 8 to 65528 bytes (64K - 8, the kernel's most)")
		set("syscall-stack", "8", "65528", "a size from 8 to 65528 bytes (64K - 8, the kernel's most)")
		set("concurrency", "1", "64", "from 1 to 64 collections at a time")
		set("max-targets", "1", "100000", "from 1 to 100000 processes")
		set("freeze-budget", "1e-9", "1", "a fraction above 0, at most 1")
		set("min-interval", "1ms", maxWait, "a duration from 1ms to "+maxWait)
		set("discover-interval", "1ms", maxWait, "a duration from 1ms to "+maxWait)
		set("max-stacks", "1", "10000", "from 1 to 10000 stacks")
		set("max-disk", "65536", maxSize, "a size of at least 64K such as 64M")
		set("trigger-rss", "1", maxSize, "a size such as 4G")
		set("trigger-cgroup", "1", maxSize, "a size such as 4G")
		set("cooldown", "0", maxWait, "a duration from 0 to "+maxWait)
		set("max-snapshots", "0", "1000", "from 0 to 1000 snapshots")
		set("pprof-every", "1ms", maxWait, "a duration from 1ms to "+maxWait)
		set("pprof-keep", "0", "1000000", "0 (all) or a number of profiles")
		set("walk-every", "0", maxWait, "0 (no walks) or a duration up to "+maxWait)
		set("walk-max-stop", "1ms", "1m", "a duration from 1ms to 1m")
		// The exporter's profiles: each one a sampler kept in a server, and
		// a profile built from its samples; a profile built more often
		// than ten times a second is work no scrape asks for.
		set("profile-max", "1", "64", "from 1 to 64 processes")
		set("profile-rate", "1", maxSize, "a size of at least 1 byte such as 512K")
		set("profile-every", "100ms", maxWait, "a duration from 100ms to "+maxWait)
	}
}
