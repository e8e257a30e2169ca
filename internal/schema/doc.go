// Package schema owns the JSON documents arenactl prints (info, trim, maps,
// snapshot, diff, watch's lines, and leaks' profile) and the conversions to
// them from the report model (from stackprof's profile for leaks), and reads
// back the documents diff compares. The field names are a promise of the
// docs/json.md: add fields, never rename or remove one. Every byte count is an
// integer number of bytes, every duration an integer number of
// microseconds. The golden files of cmd/arenactl pin them.
package schema

// Version is the version of the documents' schema: it changes only when a
// field changes meaning or goes, which the rule above forbids within one
// version.
const Version = 1
