package bpf

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
)

// Kind says what the user must do about a failure.
type Kind int

const (
	KindOther Kind = iota
	// KindNotAllowed: the kernel refused eBPF to this process (no
	// CAP_BPF and CAP_PERFMON, lockdown, a container's seccomp profile).
	KindNotAllowed
	// KindUnsupported: the kernel has no eBPF, no such map type, helper
	// or tracepoint, or its verifier refused the program.
	KindUnsupported
	// KindResources: out of file descriptors or locked memory.
	KindResources
)

// Error is a failure of the bpf(2) interface, with its kind.
type Error struct {
	Kind Kind
	Op   string
	Err  error
}

func (e *Error) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Is: a refusal is errkind.ErrNoPerf's kind, as perf's refusals are: the
// kernel will not trace the process for arenactl.
func (e *Error) Is(target error) bool {
	return (e.Kind == KindNotAllowed || e.Kind == KindUnsupported) && target == errkind.ErrNoPerf
}

// KindOf is err's kind, KindOther for an error not of this package.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindOther
}

func wrap(op string, err error) error {
	k := KindOther
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		k = KindNotAllowed
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		k = KindUnsupported
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOMEM):
		k = KindResources
	}
	return &Error{Kind: k, Op: op, Err: err}
}

// bpf(2) commands, map and program types (enum bpf_cmd, bpf_map_type,
// bpf_prog_type).
const (
	cmdMapCreate     = 0
	cmdMapLookupElem = 1
	cmdProgLoad      = 5
	cmdRawTPOpen     = 17

	MapArray   = 2
	MapRingbuf = 27

	progRawTracepoint = 17
)

func sysBPF(cmd int, attr unsafe.Pointer, size uintptr) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// Map is a map the kernel holds, by its fd.
type Map struct {
	FD        int
	ValueSize uint32
}

// NewMap creates a map: for MapArray, max entries of valueSize bytes (4
// byte keys); for MapRingbuf, a ring of max bytes (a power of two number
// of pages), keyless.
func NewMap(typ, keySize, valueSize, max uint32, name string) (*Map, error) {
	var attr struct {
		typ, keySize, valueSize, max, flags, inner, numa uint32
		name                                             [16]byte
	}
	attr.typ, attr.keySize, attr.valueSize, attr.max = typ, keySize, valueSize, max
	copy(attr.name[:15], name)
	fd, err := sysBPF(cmdMapCreate, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if errors.Is(err, unix.EPERM) {
		// Kernels before 5.11 charge maps to RLIMIT_MEMLOCK, 8 MiB by
		// default: root may lift it (later kernels charge the cgroup).
		lim := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
		if unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil {
			fd, err = sysBPF(cmdMapCreate, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
		}
	}
	if err != nil {
		return nil, wrap("creating eBPF map "+name, err)
	}
	unix.CloseOnExec(fd)
	return &Map{FD: fd, ValueSize: valueSize}, nil
}

// Lookup copies the value at a 4-byte key.
func (m *Map) Lookup(key uint32) ([]byte, error) {
	v := make([]byte, m.ValueSize)
	// The attributes' pointers are unsafe.Pointers, not integers: Go
	// moves a stack that grows and updates only the pointers in it.
	var attr struct {
		fd    uint32
		_     uint32
		key   unsafe.Pointer
		value unsafe.Pointer
		flags uint64
	}
	attr.fd, attr.key, attr.value = uint32(m.FD), unsafe.Pointer(&key), unsafe.Pointer(&v[0])
	_, err := sysBPF(cmdMapLookupElem, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		return nil, wrap("reading eBPF map", err)
	}
	return v, nil
}

// Close frees the map (once no program uses it).
func (m *Map) Close() error { return unix.Close(m.FD) }

// Prog is a loaded program, by its fd.
type Prog struct{ FD int }

// License is the in-kernel program's: GPL-compatible, as the helpers that
// read memory and write the ring buffer require.
const License = "Dual BSD/GPL"

// LoadRawTracepoint loads a raw tracepoint program. A refusal by the
// verifier carries the last lines of its log.
func LoadRawTracepoint(insns []Insn, name string) (*Prog, error) {
	code := encode(insns)
	lic := []byte(License + "\x00")
	log := make([]byte, 1<<20)
	var attr struct {
		typ, cnt        uint32
		insns, license  unsafe.Pointer
		logLevel, logSz uint32
		logBuf          unsafe.Pointer
		kernVersion     uint32
		flags           uint32
		name            [16]byte
		ifindex, attach uint32
	}
	attr.typ, attr.cnt = progRawTracepoint, uint32(len(insns))
	attr.insns, attr.license = unsafe.Pointer(&code[0]), unsafe.Pointer(&lic[0])
	copy(attr.name[:15], name)
	fd, err := sysBPF(cmdProgLoad, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EINVAL)) {
		// Load again with the verifier's log, to say why.
		attr.logLevel, attr.logSz, attr.logBuf = 1, uint32(len(log)), unsafe.Pointer(&log[0])
		fd2, err2 := sysBPF(cmdProgLoad, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
		if err2 == nil {
			unix.Close(fd2) // refused once: the refusal stands
		} else if s := lastLines(log, 3); s != "" {
			err = fmt.Errorf("%w (verifier: %s)", err, s)
		}
	}
	if err != nil {
		return nil, wrap("loading eBPF program "+name, err)
	}
	unix.CloseOnExec(fd)
	return &Prog{FD: fd}, nil
}

func lastLines(log []byte, n int) string {
	s := string(log)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// AttachRawTracepoint attaches p to the raw tracepoint name
// ("sys_exit"); closing the returned fd (or the process's end) detaches
// it.
func (p *Prog) AttachRawTracepoint(name string) (int, error) {
	n := []byte(name + "\x00")
	var attr struct {
		name unsafe.Pointer
		prog uint32
		_    uint32
	}
	attr.name, attr.prog = unsafe.Pointer(&n[0]), uint32(p.FD)
	fd, err := sysBPF(cmdRawTPOpen, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		return -1, wrap("attaching eBPF program to raw tracepoint "+name, err)
	}
	unix.CloseOnExec(fd)
	return fd, nil
}

// Close unloads the program (once detached).
func (p *Prog) Close() error { return unix.Close(p.FD) }
