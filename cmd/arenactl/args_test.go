package main

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/arenactl/arenactl/internal/testutil"
)

// The command line's small lies (issue 22, item 8): "+5" was process 5;
// --timeout -1s ran and failed as "did not stop" (exit 1); --pad and
// --min-change refused 64K while --rate took it; info and maps said they
// take one process id, and their usage lines said PID, though both read
// cores.
func TestCommandLineIsStrict(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "1")
	pid := fmt.Sprint(tg.Pid)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trim", "+" + pid}, `"+` + pid + `" is not a process id`},
		{[]string{"info", "+" + pid}, "is neither a process id nor a readable core file"},
		{[]string{"snapshot", "-o", "/tmp/x.core", " " + pid}, "is not a process id"},
		{[]string{"info", "--timeout", "-1s", pid}, "--timeout -1s: a duration cannot be negative"},
		{[]string{"snapshot", "--timeout", "0s", "-o", "/tmp/x.core", pid}, "--timeout must be above 0"},
		{[]string{"watch", "--interval", "-5s", pid}, "--interval -5s: a duration cannot be negative"},
		{[]string{"info", pid, pid}, "info takes one process id or core file"},
		{[]string{"maps"}, "maps takes one process id or core file"},
		{[]string{"trim", "--pad", "64Q", pid}, "is not a size such as"},
	} {
		r := run(t, c.args...)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, c.want) || strings.Count(r.Stderr, "\n") != 1 {
			t.Errorf("arenactl %s: exit %d, %q; want exit 2 and %q", strings.Join(c.args, " "), r.Code, r.Stderr, c.want)
		}
	}
	if out := mustRun(t, "trim", "--pad", "64K", pid).Stdout; !strings.Contains(out, "malloc_trim(65536)") {
		t.Errorf("--pad 64K:\n%s", out)
	}
	mustRun(t, "watch", "--count", "1", "--interval", "1s", "--min-change", "1M", pid)
	for _, cmd := range []string{"info", "maps"} {
		if out := mustRun(t, cmd, "--help").Stdout; !strings.Contains(out, "arenactl "+cmd+" PID|CORE") {
			t.Errorf("%s --help: no PID|CORE in the usage line:\n%s", cmd, out)
		}
	}
	mustQuit(t, tg)
}

// TestEveryNumericFlagLimited: every numeric flag of every command has a
// range that checkLimits enforces (--jobs has its own check), and its
// default is inside it.
func TestEveryNumericFlagLimited(t *testing.T) {
	root := newRoot()
	for _, c := range root.Commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !numericTypes[f.Value.Type()] || f.Name == "jobs" {
				return
			}
			r, ok := f.Annotations[rangeKey]
			if !ok {
				t.Errorf("%s --%s (%s) has no limit: give it one in setLimits", c.Name(), f.Name, f.Value.Type())
				return
			}
			lo, lok := number(f.Value.Type(), r[0])
			hi, hok := number(f.Value.Type(), r[1])
			if !lok || !hok || lo.Cmp(hi) > 0 {
				t.Errorf("%s --%s: the range %q to %q does not read as its type", c.Name(), f.Name, r[0], r[1])
				return
			}
			if f.DefValue == "" || f.Value.Type() == "SIZE" && f.DefValue == "0" {
				return // unset: the package below decides
			}
			if d, ok := number(f.Value.Type(), f.DefValue); !ok || d.Cmp(lo) < 0 || d.Cmp(hi) > 0 {
				t.Errorf("%s --%s: the default %s is outside %s", c.Name(), f.Name, f.DefValue, r[2])
			}
		})
	}
}

// TestGarbageArguments: every command refuses a garbage or out-of-range
// value of any of its flags before it does anything, with exit 2 and one
// line naming the flag: just past each end of a flag's range, and text
// that is no number. The process id given does not exist, so a value let
// through shows as another exit code. growth's --period 2^64-1,
// --syscall-stack 1G and --stack 100K ended in perf_event_open's EINVAL
// (exit 1), and --stack 1T was cut to 32 bits and taken.
func TestGarbageArguments(t *testing.T) {
	const nopid = "99999999"
	positional := map[string][]string{"diff": {"a.json", "b.json"}, "exporter": {"--pid", nopid}}
	root := newRoot()
	type probe struct{ cmd, flag, value string }
	var probes []probe
	for _, c := range root.Commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			r, ok := f.Annotations[rangeKey]
			if !ok {
				return
			}
			for _, v := range append(outside(t, f.Value.Type(), r[0], r[1]), "x", "", "1e400", "-", "１", "99999999999999999999999999") {
				probes = append(probes, probe{c.Name(), f.Name, v})
			}
		})
		probes = append(probes, probe{c.Name(), "no-such-flag", "1"})
		if c.Flags().Lookup("freeze") != nil {
			probes = append(probes, probe{c.Name(), "freeze", "bogus"})
		}
	}
	probes = append(probes, probe{"heap", "addr", "zz"}, probe{"exporter", "pid", "-5"}, probe{"exporter", "pid", "x"},
		probe{"growth", "stack", "100K"}, probe{"growth", "stack", "1T"}, probe{"growth", "syscall-stack", "1G"},
		probe{"growth", "period", "18446744073709551615"}, probe{"leaks", "http", "nohost:port:x"},
		// exporter --listen said so with exit 1; --freeze none came
		// after it was serving.
		probe{"exporter", "listen", "nonsense"}, probe{"exporter", "listen", "127.0.0.1:99999"}, probe{"exporter", "freeze", "none"})
	seen := map[string]bool{}
	for _, p := range probes {
		args := append([]string{p.cmd, "--" + p.flag + "=" + p.value}, positional[p.cmd]...)
		if _, ok := positional[p.cmd]; !ok && p.cmd != "version" {
			args = append(args, nopid)
		}
		if p.cmd == "version" {
			continue
		}
		seen[p.cmd] = true
		r := run(t, args...)
		if r.Code != exitUsage || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "--"+p.flag) ||
			strings.Contains(r.Stderr, "goroutine") {
			t.Errorf("arenactl %s: exit %d, %q; want exit 2 and one line naming --%s", strings.Join(args, " "), r.Code, r.Stderr, p.flag)
		}
	}
	// growth -o a directory said "leaks writes its profile".
	for _, cmd := range []string{"leaks", "growth"} {
		r := run(t, cmd, "-o", t.TempDir(), nopid)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, cmd+" writes its profile") {
			t.Errorf("%s -o DIR: exit %d, %q", cmd, r.Code, r.Stderr)
		}
	}
	for _, c := range root.Commands() {
		if !seen[c.Name()] && c.Name() != "version" && !c.Hidden {
			t.Errorf("no garbage tried on %s", c.Name())
		}
	}
}

// outside is a value just below lo (when the type has one) and one just
// above hi, in the syntax of a flag of type typ.
func outside(t *testing.T, typ, lo, hi string) []string {
	t.Helper()
	switch typ {
	case "duration":
		l, _ := time.ParseDuration(lo)
		h, _ := time.ParseDuration(hi)
		return []string{(l - 1).String(), (h + 1).String()}
	case "float64":
		l, _ := strconv.ParseFloat(lo, 64)
		h, _ := strconv.ParseFloat(hi, 64)
		return []string{strconv.FormatFloat(l/2, 'g', -1, 64), strconv.FormatFloat(h*1.000001, 'g', -1, 64)}
	}
	l, lok := number(typ, lo)
	h, hok := number(typ, hi)
	if !lok || !hok {
		t.Fatalf("%s range %s to %s", typ, lo, hi)
	}
	li, _ := l.Int(nil)
	hi2, _ := h.Int(nil)
	var out []string
	if li.Sign() > 0 || typ == "int" {
		out = append(out, new(big.Int).Sub(li, big.NewInt(1)).String())
	}
	return append(out, new(big.Int).Add(hi2, big.NewInt(1)).String())
}
