package schema_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/testutil"
)

// diff compares what it reads back from documents: for every core fixture,
// the summary read from the info document (and from a line of watch) is
// the one the report itself gives, so diff of two files and watch's
// comparison of two samples cannot disagree.
func TestReadSummaryIsTheReports(t *testing.T) {
	cores, _ := filepath.Glob(filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "*.core.zst"))
	if len(cores) == 0 {
		t.Fatal("no core fixtures in testdata/cores")
	}
	empty := t.TempDir()
	for _, c := range cores {
		t.Run(filepath.Base(c), func(t *testing.T) {
			rep, err := inspect.Core(context.Background(), c, inspect.CoreOptions{Sysroot: empty, Options: heap.Options{DebugDirs: []string{empty}, NoLibcFile: true}})
			if err != nil {
				t.Fatal(err)
			}
			fs := diagnose.Diagnose(rep, diagnose.Env{})
			want := report.Summarize(rep, diagnose.Summaries(fs))

			path := filepath.Join(t.TempDir(), "info.json")
			write(t, path, schema.NewInfo(rep, fs))
			got, err := schema.ReadSummary(path)
			if err != nil {
				t.Fatal(err)
			}
			want.Source = path
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read back:\n%+v\nwant\n%+v", got, want)
			}

			at := time.Date(2026, 11, 23, 19, 2, 13, 123456789, time.FixedZone("", 3600))
			write(t, path, schema.NewWatchSample(0, at.Add(-time.Second), rep, nil), schema.NewWatchSample(7, at, rep, fs))
			got, err = schema.ReadSummary(path)
			if err != nil {
				t.Fatal(err)
			}
			if got.Sample == nil || got.Sample.Index != 7 || !got.Sample.Time.Equal(at) {
				t.Fatalf("the last line of watch read as sample %+v, want 7 at %s", got.Sample, at)
			}
			got.Sample = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read back from watch:\n%+v\nwant\n%+v", got, want)
			}
			if d := report.Compare(got, want); d.Changed || len(d.Warnings) != 0 {
				t.Errorf("a report compared with its own document: changed %v, warnings %q", d.Changed, d.Warnings)
			}
		})
	}
}

// write puts docs in path, one JSON document a line as watch --json does.
func write(t *testing.T, path string, docs ...any) {
	t.Helper()
	var b []byte
	for _, d := range docs {
		j, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, j...), '\n')
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
