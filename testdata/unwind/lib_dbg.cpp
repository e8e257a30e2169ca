// Built -g into libchain_dbg.so (its debug info then moved to a separate
// file found by build-id): a frame in a shared library at an arbitrary base.
namespace nd {
int d(int n, int (*cb)(int));
}

namespace lib {
__attribute__((noinline)) int c(int n, int (*cb)(int)) {
	int r = nd::d(n * 2, cb);
	return r + n;
}
}  // namespace lib
