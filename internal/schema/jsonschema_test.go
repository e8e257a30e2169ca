package schema_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite schema/v1/*.schema.json from the Go types")

// The published schemas are the documents' types, derived: a change of a
// type that changes its schema must be deliberate (go test -run
// TestSchemaFiles -update), and shows in review as a schema diff.
func TestSchemaFiles(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(t), "schema", "v1")
	for name, v := range schema.Documents {
		b, err := json.MarshalIndent(schema.JSONSchema(name, v), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
		path := filepath.Join(dir, name+".schema.json")
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil || string(want) != string(b) {
			t.Errorf("%s is not the schema of schema.%T (%v): go test ./internal/schema -run TestSchemaFiles -update", path, v, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if len(files) != len(schema.Documents) {
		t.Errorf("%d schema files in %s, %d documents", len(files), dir, len(schema.Documents))
	}
}

// Every golden document of the end-to-end tests (e2e/walk) follows its schema.
func TestGoldenDocumentsFollowSchemas(t *testing.T) {
	golden, _ := filepath.Glob(filepath.Join(testutil.RepoRoot(t), "e2e", "walk", "testdata", "golden", "*.json"))
	if len(golden) == 0 {
		t.Fatal("no golden documents")
	}
	for _, path := range golden {
		doc := "info"
		switch base := filepath.Base(path); {
		case strings.HasSuffix(base, ".maps.json"):
			doc = "maps"
		case strings.HasSuffix(base, ".heap.json"):
			doc = "heap"
		case strings.HasPrefix(base, "diff"):
			doc = "diff"
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		testutil.ValidateJSON(t, doc, b)
	}
}
