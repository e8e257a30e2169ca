// Package ptrace owns everything arenactl does to a live process through the
// kernel: attaching to single threads, stopping and resuming them, saving and
// restoring their registers, reading and writing memory, and running a
// function inside the target (Call). It knows nothing about malloc.
//
// Every ptrace request is issued from one locked OS thread, because the kernel
// ties a tracee to the thread that attached to it.
package ptrace
