/* A shared library linked to load at a fixed address, the way prelink once
 * placed Red Hat's libraries (libc at 0x30ed600000): ld.so maps it where it
 * asks to be when that place is free, and its link_map's l_addr is 0, so
 * its ELF header is not at its load bias. Built with -shared and
 * -Wl,-Ttext-segment=ADDR by arenactl's tests, and linked into
 * fixedlib_main.c. */
int fixed_value = 42;

int fixed_get(void) { return fixed_value; }
