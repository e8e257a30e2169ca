// Package layouts owns glibc's version-dependent facts as plain data: a
// glibc release (Version) and, for each release from 2.17 to 2.43, the
// offsets of its allocator's structures and the shape of its malloc_info
// output (Layout). It reads nothing and imports nothing of arenactl but the
// malloc_info format it describes, so that both the code that finds a libc
// (whose fingerprint of a static executable tries every layout) and the
// walker can use it without importing each other.
package layouts
