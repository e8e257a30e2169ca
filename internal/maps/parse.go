package maps

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// deletedSuffix is what the kernel appends to the path of a mapped file
// that has since been unlinked.
const deletedSuffix = " (deleted)"

// maxLine bounds one line of input. A path is at most PATH_MAX (4096)
// bytes, but the kernel escapes some bytes in it as \ooo, so leave room.
const maxLine = 64 << 10

// ParseMaps parses the text of /proc/PID/maps. Blank lines are skipped;
// any other line that is not a mapping header is an error naming it.
//
// The text is read whole and cut into lines in place, the mappings' slice
// made once at its size, and the fields of each mapping are pieces of that
// one text: parsed line by line through a scanner, appending, a process of
// 2,000 threads (4,054 mappings) took 4-7 ms, while every thread was
// stopped (the freeze reads the mappings again, live.Target.Freeze).
func ParseMaps(r io.Reader) ([]Mapping, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("parse maps: %w", err)
	}
	text := string(data)
	ms := make([]Mapping, 0, strings.Count(text, "\n")+1)
	for n := 1; text != ""; n++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		line = strings.TrimSuffix(line, "\r") // as bufio.ScanLines, which this replaced
		if len(line) > maxLine {
			return nil, fmt.Errorf("parse maps: line %d: longer than %d bytes", n, maxLine)
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseHeader(line)
		if err != nil {
			return nil, fmt.Errorf("parse maps: line %d: %w", n, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// ParseSmaps parses the text of /proc/PID/smaps: each mapping header is
// followed by "Key: N kB" lines, whose counters are stored in bytes.
// Keys the Mapping has no field for (Size, KSM, VmFlags, THPeligible,
// ProtectionKey, ...) are skipped, because every kernel release adds some.
func ParseSmaps(r io.Reader) ([]Mapping, error) {
	var ms []Mapping
	err := eachLine(r, func(line string) error {
		key, value, isField := splitField(line)
		if !isField {
			m, err := parseHeader(line)
			if err != nil {
				return err
			}
			ms = append(ms, m)
			return nil
		}
		if len(ms) == 0 {
			return fmt.Errorf("field %s before the first mapping", key)
		}
		dst := smapsField(&ms[len(ms)-1], key)
		if dst == nil {
			return nil
		}
		n, err := parseKB(value)
		if err != nil {
			return fmt.Errorf("field %s: %w", key, err)
		}
		*dst = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("parse smaps: %w", err)
	}
	return ms, nil
}

// Rollup is /proc/PID/smaps_rollup: the smaps counters summed over all
// mappings by the kernel, in bytes.
type Rollup struct {
	Rss, Pss                   uint64
	PssAnon, PssFile, PssShmem uint64
	SharedClean, SharedDirty   uint64
	PrivateClean, PrivateDirty uint64
	Anonymous, AnonHugePages   uint64
	Swap, SwapPss              uint64
}

// ParseRollup parses the text of /proc/PID/smaps_rollup. The kernel
// prints a "[rollup]" pseudo-mapping header first; a text without it is
// rejected, since an empty file is what a process without memory (a zombie
// or kernel thread) gives, and that is not a zero rollup.
func ParseRollup(r io.Reader) (Rollup, error) {
	var ru Rollup
	sawHeader := false
	err := eachLine(r, func(line string) error {
		key, value, isField := splitField(line)
		if !isField {
			if sawHeader {
				return errors.New("second header in smaps_rollup")
			}
			if _, err := parseHeader(line); err != nil {
				return err
			}
			sawHeader = true
			return nil
		}
		if !sawHeader {
			return fmt.Errorf("field %s before the [rollup] header", key)
		}
		dst := rollupField(&ru, key)
		if dst == nil {
			return nil
		}
		n, err := parseKB(value)
		if err != nil {
			return fmt.Errorf("field %s: %w", key, err)
		}
		*dst = n
		return nil
	})
	if err == nil && !sawHeader {
		err = errors.New("no [rollup] header")
	}
	if err != nil {
		return Rollup{}, fmt.Errorf("parse smaps_rollup: %w", err)
	}
	return ru, nil
}

// eachLine calls fn for every non-blank line of r and prefixes fn's
// error with the line number.
func eachLine(r io.Reader, fn func(line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("after line %d: %w", n, err)
	}
	return nil
}

// parseHeader parses one maps line:
//
//	7f0e2c000000-7f0e2c021000 rw-p 00000000 00:00 0    [anon: glibc: malloc arena]
//
// Everything after the inode, less the padding, is the path; it may hold
// spaces, so it cannot be split on them.
func parseHeader(line string) (Mapping, error) {
	var m Mapping
	rest := line
	var addrs, perms, off, dev, inode string
	for _, f := range []*string{&addrs, &perms, &off, &dev, &inode} {
		*f, rest = nextField(rest)
	}
	if inode == "" {
		return m, fmt.Errorf("malformed mapping %q: want 5 fields before the path", line)
	}
	bad := func(what string, err error) (Mapping, error) {
		return Mapping{}, fmt.Errorf("malformed mapping %q: %s: %w", line, what, err)
	}

	lo, hi, ok := strings.Cut(addrs, "-")
	if !ok {
		return bad("address range", errors.New("no '-'"))
	}
	var err error
	if m.Start, err = parseHex(lo); err != nil {
		return bad("start address", err)
	}
	if m.End, err = parseHex(hi); err != nil {
		return bad("end address", err)
	}
	if m.End < m.Start {
		return bad("address range", errors.New("end before start"))
	}
	if len(perms) != 4 {
		return bad("perms", fmt.Errorf("%q is not 4 characters", perms))
	}
	m.Perms = perms
	if m.Offset, err = parseHex(off); err != nil {
		return bad("offset", err)
	}
	if !strings.Contains(dev, ":") {
		return bad("device", fmt.Errorf("%q is not major:minor", dev))
	}
	m.Dev = dev
	if m.Inode, err = strconv.ParseUint(inode, 10, 64); err != nil {
		return bad("inode", err)
	}

	// The kernel pads the path to a column with spaces, so a path that
	// itself starts with a space cannot be told apart; trailing spaces are
	// kept.
	m.Path = strings.TrimLeft(rest, " \t")
	// Path keeps the suffix: opening the path of a deleted file would open
	// whatever replaced it (say, the upgraded libc), not what is mapped.
	m.Deleted = strings.HasPrefix(m.Path, "/") && strings.HasSuffix(m.Path, deletedSuffix)
	return m, nil
}

// nextField returns the first space-separated field of s and the rest of
// s after it, untouched.
func nextField(s string) (field, rest string) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	j := i
	for j < len(s) && s[j] != ' ' && s[j] != '\t' {
		j++
	}
	return s[i:j], s[j:]
}

func parseHex(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("empty number")
	}
	return strconv.ParseUint(s, 16, 64)
}

// splitField recognizes a "Key: value" line of smaps. A mapping header can
// never look like one: its first field is an address range, not "Key:".
func splitField(line string) (key, value string, ok bool) {
	first, rest := nextField(line)
	key, ok = strings.CutSuffix(first, ":")
	if !ok || key == "" {
		return "", "", false
	}
	return key, strings.TrimSpace(rest), true
}

// parseKB converts "N kB" to bytes.
func parseKB(value string) (uint64, error) {
	num, unit, _ := strings.Cut(value, " ")
	if strings.TrimSpace(unit) != "kB" {
		return 0, fmt.Errorf("value %q is not in kB", value)
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint64/1024 {
		return 0, fmt.Errorf("value %q overflows bytes", value)
	}
	return n * 1024, nil
}

func smapsField(m *Mapping, key string) *uint64 {
	switch key {
	case "Rss":
		return &m.Rss
	case "Pss":
		return &m.Pss
	case "Shared_Clean":
		return &m.SharedClean
	case "Shared_Dirty":
		return &m.SharedDirty
	case "Private_Clean":
		return &m.PrivateClean
	case "Private_Dirty":
		return &m.PrivateDirty
	case "Anonymous":
		return &m.Anonymous
	case "AnonHugePages":
		return &m.AnonHugePages
	case "Swap":
		return &m.Swap
	}
	return nil
}

func rollupField(r *Rollup, key string) *uint64 {
	switch key {
	case "Rss":
		return &r.Rss
	case "Pss":
		return &r.Pss
	case "Pss_Anon":
		return &r.PssAnon
	case "Pss_File":
		return &r.PssFile
	case "Pss_Shmem":
		return &r.PssShmem
	case "Shared_Clean":
		return &r.SharedClean
	case "Shared_Dirty":
		return &r.SharedDirty
	case "Private_Clean":
		return &r.PrivateClean
	case "Private_Dirty":
		return &r.PrivateDirty
	case "Anonymous":
		return &r.Anonymous
	case "AnonHugePages":
		return &r.AnonHugePages
	case "Swap":
		return &r.Swap
	case "SwapPss":
		return &r.SwapPss
	}
	return nil
}
