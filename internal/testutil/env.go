package testutil

import (
	"os"
	"strconv"
)

// Rounds is how many rounds a soak or stress test makes: the positive
// integer in the environment variable name (the long form, e.g.
// ARENACTL_KILL_ROUNDS=1000), else def (the short form CI runs).
func Rounds(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
