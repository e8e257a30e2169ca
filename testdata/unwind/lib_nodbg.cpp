// Built without -g into libchain_nodbg.so: named from its symbols only.
namespace nd {
__attribute__((noinline)) int d(int n, int (*cb)(int)) {
	int r = cb(n + 5);
	return r * 2 + 1;
}
}  // namespace nd
