package ptrace

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ReadAt reads target memory. process_vm_readv needs no stopped thread and
// reads in one syscall; /proc/PID/mem is the fallback for pages it refuses
// (e.g. PROT_NONE guard pages read by a forgiving caller get an error either
// way, but some kernels refuse process_vm_readv across VM_IO mappings). Both
// go through the live thread Open chose: an exited main thread has no memory.
func (p *Process) ReadAt(b []byte, addr uint64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}
	n, err := unix.ProcessVMReadv(p.memTid, local, remote, 0)
	if err == nil && n == len(b) {
		return n, nil
	}
	n, err = p.mem.ReadAt(b, int64(addr))
	if err != nil {
		return n, fmt.Errorf("reading %d bytes at %#x in process %d: %w", len(b), addr, p.Pid, err)
	}
	return n, nil
}

// WriteAt writes target memory through /proc/PID/mem, which (unlike
// process_vm_writev) also works on pages the target mapped read-only.
func (p *Process) WriteAt(b []byte, addr uint64) (int, error) {
	n, err := p.mem.WriteAt(b, int64(addr))
	if err != nil {
		return n, fmt.Errorf("writing %d bytes at %#x in process %d: %w", len(b), addr, p.Pid, err)
	}
	return n, nil
}

// ReadUint64 reads one little-endian word.
func (p *Process) ReadUint64(addr uint64) (uint64, error) {
	var b [8]byte
	if _, err := p.ReadAt(b[:], addr); err != nil {
		return 0, err
	}
	return le64(b[:]), nil
}
