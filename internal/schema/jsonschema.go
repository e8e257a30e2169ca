package schema

import (
	"reflect"
	"strings"
)

// Documents are the top-level documents, by the name of their schema file
// (schema/v1/NAME.schema.json at the repository's root) and of the command
// that prints them.
var Documents = map[string]any{
	"info":     Info{},
	"trim":     Trim{},
	"maps":     Maps{},
	"snapshot": Snapshot{},
	"diff":     Diff{},
	"watch":    WatchSample{},
	"leaks":    Leaks{},
	"heap":     HeapContents{},
	"growth":   Growth{},
	"record":   Recording{},
}

// JSONSchema is the JSON Schema (draft 2020-12) of the document v, derived
// from its Go type by encoding/json's own rules: a field is required unless
// it is omitempty; a pointer may be null; a nil slice never is (the
// documents print [] for none); no property outside the type is allowed, so
// a field renamed in the code no longer validates old output, and the other
// way round.
//
// It is written by hand, not with a schema-from-struct library: those (such
// as invopop/jsonschema) make a pointer field an object that may not be null
// and know nothing of omitempty's "absent, never null", which is what the
// documents' consumers need to be told.
func JSONSchema(name string, v any) map[string]any {
	g := &generator{defs: map[string]any{}}
	root := g.schema(reflect.TypeOf(v))
	out := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$id":     "https://github.com/arenactl/arenactl/schema/v1/" + name + ".schema.json",
		"title":   "arenactl " + name + " --json, schema version 1",
	}
	for k, v := range g.defs[root["$ref"].(string)[len("#/$defs/"):]].(map[string]any) {
		out[k] = v
	}
	delete(g.defs, root["$ref"].(string)[len("#/$defs/"):])
	if len(g.defs) > 0 {
		out["$defs"] = g.defs
	}
	return out
}

type generator struct{ defs map[string]any }

func (g *generator) schema(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.Pointer:
		return map[string]any{"anyOf": []any{g.schema(t.Elem()), map[string]any{"type": "null"}}}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		name := t.Name()
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // a type that refers to itself
			props, required := map[string]any{}, []string{}
			g.fields(t, props, &required)
			def := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
			if len(required) > 0 {
				def["required"] = required
			}
			g.defs[name] = def
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	panic("schema: no JSON Schema for " + t.String())
}

// fields adds t's JSON properties, with embedded structs' flattened into it
// as encoding/json does.
func (g *generator) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			g.fields(f.Type, props, required)
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.schema(f.Type)
		omitempty := strings.Contains(","+opts+",", ",omitempty,")
		if omitempty && f.Type.Kind() == reflect.Pointer {
			s = g.schema(f.Type.Elem()) // absent when nil, never null
		}
		props[name] = s
		if !omitempty {
			*required = append(*required, name)
		}
	}
}
