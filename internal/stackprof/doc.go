// Package stackprof owns every profile by call stack, from the samples to
// what the user sees: leaks' sampled heap profile and growth's stacks of
// faults and memory calls (it was heapprof, from before growth's stacks
// came here). For the heap profile: the samples the in-target sampler
// hands over (Raw, Window; Call turns a hook's view of a call into Raw's registers and stack),
// turned into a Profile of allocation sites (Build, or a Builder fed as
// the ring is drained: unwound with internal/unwind, symbolized with
// internal/symbolize, aggregated per symbolized call stack, with the
// unbiased estimates of byte sampling), the operations on it (top sites,
// growth, how much of a measured growth it explains), and its codecs:
// pprof's gzipped profile.proto (WritePprof), FlameGraph's folded stacks
// (WriteFolded), and pprof's own web UI over it (Web). The JSON
// document is package schema's, the terminal text package render's.
//
// The files split as google/pprof's profile package does: the model
// (profile.go), building it (build.go), operations (ops.go), codecs
// (pprof.go, folded.go) and the web view (serve.go).
package stackprof
