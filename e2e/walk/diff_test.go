package walk

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// saveInfo writes arenactl info --json (with flags) of pid to dir/name.
func saveInfo(t *testing.T, dir, name string, pid int, flags ...string) string {
	t.Helper()
	r := mustRun(t, append(append([]string{"info", "--json"}, flags...), fmt.Sprint(pid))...)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(r.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func diffJSON(t *testing.T, a, b string) (jsonDiff, result) {
	t.Helper()
	r := mustRun(t, "diff", "--json", a, b)
	var d jsonDiff
	if err := decodeDoc([]byte(r.Stdout), &d); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, r.Stdout)
	}
	return d, r
}

// A target grown by 32 MiB in its worker's arena and 8 MiB in main_arena:
// diff puts the worker's arena first with a growth of 32 MiB, main_arena
// next with 8, and the heap classes' RSS grew by as much; in the table too.
// The documents of a read-only walk match arenas by address, those of an
// injected malloc_info by position.
func TestDiffGrowth(t *testing.T) {
	for _, c := range []struct {
		name, matched string
		flags         []string
	}{{"read-only", "address", []string{"--read-only"}}, {"injected", "position", nil}} {
		t.Run(c.name, func(t *testing.T) {
			tg := startGrow(t)
			dir := t.TempDir()
			a := saveInfo(t, dir, "a.json", tg.Pid, c.flags...)
			mustGrow(t, tg, "grow 32")
			mustGrow(t, tg, "main 8")
			b := saveInfo(t, dir, "b.json", tg.Pid, c.flags...)
			d, r := diffJSON(t, a, b)
			if r.Stderr != "" || len(d.Warnings) != 0 {
				t.Errorf("warnings: %q %v", r.Stderr, d.Warnings)
			}
			if !d.Changed || d.MatchedBy != c.matched || len(d.Arenas) != 2 {
				t.Fatalf("changed %v, matched by %s, %d arenas", d.Changed, d.MatchedBy, len(d.Arenas))
			}
			for i, want := range []struct {
				main bool
				mib  int64
			}{{false, 32}, {true, 8}} {
				ad := d.Arenas[i]
				if ad.Main != want.main || ad.Status != "changed" || ad.Index == nil || ad.IndexBefore == nil || *ad.Index != *ad.IndexBefore {
					t.Fatalf("arena %d of the diff: %+v", i, ad)
				}
				for what, got := range map[string]int64{"growth": ad.Growth, "system": ad.SystemCurrent.Delta, "in use": ad.InUseBytes.Delta} {
					if !within(got, want.mib<<20, 5) {
						t.Errorf("arena %d: %s grew by %d, want %d MiB", *ad.Index, what, got, want.mib)
					}
				}
				if (ad.TcacheBytes != nil) != (c.matched == "address") {
					t.Errorf("arena %d: tcache_bytes %v", *ad.Index, ad.TcacheBytes)
				}
			}
			classes := map[string]jsonClassDiff{}
			for _, cl := range d.Classes {
				classes[cl.Class] = cl
			}
			if got := classes["arena-heap"].Rss.Delta; !within(got, 32<<20, 5) {
				t.Errorf("arena-heap RSS grew by %d, want 32 MiB", got)
			}
			if got := classes["main-heap"].Rss.Delta; !within(got, 8<<20, 5) {
				t.Errorf("main-heap RSS grew by %d, want 8 MiB", got)
			}
			if d.Classes[0].Class != "arena-heap" || d.Process.Rss.Delta < 40<<20*95/100 {
				t.Errorf("first class %s, process RSS grew by %d", d.Classes[0].Class, d.Process.Rss.Delta)
			}

			text := mustRun(t, "diff", a, b).Stdout
			if rows := tableRows(text, "│  arena │"); len(rows) < 2 || rows[0] != "1" || rows[1] != "0 main" {
				t.Errorf("arena rows %q, want 1 then 0 main:\n%s", rows, text)
			}
			if !strings.Contains(text, "+32.0 MiB") || !strings.Contains(text, "+8.0 MiB") {
				t.Errorf("diff:\n%s", text)
			}
			mustQuit(t, tg)
		})
	}
}

// tableRows returns the first cells of the rows of the table whose header
// starts with header, skipping the rows that continue the one before.
func tableRows(text, header string) []string {
	var rows []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, header):
			in = true
		case in && strings.HasPrefix(l, "└"):
			return rows
		case in && strings.HasPrefix(l, "│"):
			if cell := strings.TrimSpace(strings.Split(l, "│")[1]); cell != "" {
				rows = append(rows, cell)
			}
		}
	}
	return rows
}

// A document diffed with itself: nothing changed, and diff says so; a
// watch --json file stands for its last line.
func TestDiffNoChange(t *testing.T) {
	tg := startGrow(t)
	dir := t.TempDir()
	a := saveInfo(t, dir, "a.json", tg.Pid, "--read-only")
	r := mustRun(t, "diff", a, a)
	if !strings.Contains(r.Stdout, "no change") || strings.Contains(r.Stdout, "┌") {
		t.Errorf("diff of a file with itself:\n%s", r.Stdout)
	}
	d, _ := diffJSON(t, a, a)
	if d.Changed || len(d.FindingsAppeared)+len(d.FindingsCleared) != 0 {
		t.Errorf("changed %v, findings %v %v", d.Changed, d.FindingsAppeared, d.FindingsCleared)
	}
	zero := func(what string, ds ...jsonDelta) {
		for _, x := range ds {
			if x.Delta != 0 || x.Before != x.After {
				t.Errorf("%s: %+v", what, x)
			}
		}
	}
	for _, ad := range d.Arenas {
		zero(fmt.Sprintf("arena %d", *ad.Index), ad.SystemCurrent, ad.InUseBytes, ad.FreeBytes, ad.RestBytes, *ad.TcacheBytes)
		if ad.Status != "unchanged" {
			t.Errorf("arena %d: %s", *ad.Index, ad.Status)
		}
	}
	for _, c := range d.Classes {
		zero(c.Class, c.Size, c.Rss, c.PrivateDirty, c.Swap)
	}
	zero("process", d.Process.Rss, d.Process.PrivateDirty, d.Process.Swap)
	zero("totals", d.Totals.SystemCurrent, d.Totals.InUseBytes)

	// watch --json lines: the last one is compared.
	w := mustRun(t, "watch", "--json", "--interval", "50ms", "--count", "2", fmt.Sprint(tg.Pid))
	lines := filepath.Join(dir, "watch.jsonl")
	if err := os.WriteFile(lines, []byte(w.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ = diffJSON(t, a, lines)
	if d.After.Sample == nil || *d.After.Sample != 2 || d.After.Time == "" || d.Before.Sample != nil { // samples count from 1
		t.Errorf("sides: %+v %+v", d.Before, d.After)
	}
	mustQuit(t, tg)
}

// Two processes, or two glibc versions, are compared after a warning.
func TestDiffWarnsOfOtherProcess(t *testing.T) {
	dir := t.TempDir()
	one, two := startGrow(t), startGrow(t)
	a := saveInfo(t, dir, "a.json", one.Pid, "--read-only")
	b := saveInfo(t, dir, "b.json", two.Pid, "--read-only")
	r := mustRun(t, "diff", a, b)
	if strings.Count(r.Stderr, "\n") != 1 || !strings.HasPrefix(r.Stderr, "arenactl: warning: ") ||
		!strings.Contains(r.Stderr, fmt.Sprintf("process %d", one.Pid)) || !strings.Contains(r.Stderr, fmt.Sprintf("process %d", two.Pid)) {
		t.Errorf("stderr: %q", r.Stderr)
	}
	if !strings.Contains(r.Stdout, "process: RSS") && !strings.Contains(r.Stdout, "no change") {
		t.Errorf("stdout:\n%s", r.Stdout)
	}
	mustQuit(t, one)
	mustQuit(t, two)
}

func TestDiffBadInput(t *testing.T) {
	dir := t.TempDir()
	empty, maps, junk := filepath.Join(dir, "empty.json"), filepath.Join(dir, "maps.json"), filepath.Join(dir, "junk.json")
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(maps, []byte(`{"pid": 1, "process": {}, "classes": []}`), 0o644)
	os.WriteFile(junk, []byte("<malloc version=\"1\">"), 0o644)
	expectRefusal(t, run(t, "diff", empty), exitUsage, "two files")
	expectRefusal(t, run(t, "diff", empty, empty), exitError, "empty")
	expectRefusal(t, run(t, "diff", maps, maps), exitError, "no arenas")
	expectRefusal(t, run(t, "diff", junk, junk), exitError, "not JSON")
	expectRefusal(t, run(t, "diff", filepath.Join(dir, "none"), junk), exitError, "no such file")

	// A document of a newer schema than this arenactl knows is refused by
	// name, not half read.
	doc, err := os.ReadFile(filepath.Join("testdata", "golden", "arenas-2.36-snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.json")
	os.WriteFile(newer, []byte(strings.Replace(string(doc), `"schema_version": 1`, `"schema_version": 2`, 1)), 0o644)
	expectRefusal(t, run(t, "diff", newer, newer), exitError, "schema version 2, newer than this arenactl's (1)")
}
