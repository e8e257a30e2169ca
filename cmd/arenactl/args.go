package main

import (
	"fmt"
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
