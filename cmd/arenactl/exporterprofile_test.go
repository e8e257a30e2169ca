package main

import "testing"

// The exporter's profile flags refuse what would profile nothing or
// without bound: a --profile-pid that is not watched, a regular
// expression that does not compile, a zero --profile-max or rate.
func TestExporterProfileFlags(t *testing.T) {
	expectRefusal(t, run(t, "exporter", "--pid", "1", "--profile-pid", "2"), exitUsage, "--profile-pid 2 is not watched")
	expectRefusal(t, run(t, "exporter", "--pid", "1", "--profile-pid", "0"), exitUsage, "--profile-pid 0 is not a process id")
	expectRefusal(t, run(t, "exporter", "--pid", "1", "--profile-comm", "("), exitUsage, `--profile-comm "("`)
	expectRefusal(t, run(t, "exporter", "--pid", "1", "--profile-max", "0"), exitUsage, "--profile-max")
	expectRefusal(t, run(t, "exporter", "--pid", "1", "--profile-rate", "0"), exitUsage, "--profile-rate")
}
