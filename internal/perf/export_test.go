package perf

// OpenCallsStarting is OpenCalls for a process that started at start
// (clock ticks after boot), whatever the PID's process did.
var OpenCallsStarting = openCalls

// MaxCallsRead is the most calls a ReadInto that is not the last takes.
const MaxCallsRead = maxCallsRead
