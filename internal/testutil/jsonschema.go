package testutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	schemasMu sync.Mutex
	schemas   = map[string]*jsonschema.Schema{}
)

// ValidateJSON checks every JSON document in data (one, or several one a
// line as watch --json prints) against the published schema of doc
// (schema/v1/DOC.schema.json at the repository's root), with a maintained
// validator rather than the program's own types.
func ValidateJSON(t testing.TB, doc string, data []byte) {
	t.Helper()
	s := loadSchema(t, doc)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for n := 1; ; n++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			if n == 1 {
				t.Fatalf("%s: no JSON document", doc)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s document %d: %v", doc, n, err)
		}
		if err := s.Validate(v); err != nil {
			t.Fatalf("%s document %d does not follow %s.schema.json: %v", doc, n, doc, err)
		}
	}
}

func loadSchema(t testing.TB, doc string) *jsonschema.Schema {
	t.Helper()
	schemasMu.Lock()
	defer schemasMu.Unlock()
	if s := schemas[doc]; s != nil {
		return s
	}
	path := filepath.Join(RepoRoot(t), "schema", "v1", doc+".schema.json")
	c := jsonschema.NewCompiler()
	s, err := c.Compile(path)
	if err != nil {
		t.Fatalf("schema %s: %v", path, err)
	}
	schemas[doc] = s
	return s
}
