package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/arenactl/arenactl/internal/debuginfod"
	"github.com/arenactl/arenactl/internal/module"
)

// fetchDebug fetches, where DEBUGINFOD_URLS names servers, the debug files
// of the modules that have none here, before a window opens or an image is
// made: nothing of the target is held meanwhile, and the wait is bounded
// by the client's MaxTime in all. Every outcome is a note; nothing here
// fails the command (debug info is used when present, never required).
func fetchDebug(ctx context.Context, mods *module.Table, note func(string)) {
	if note == nil {
		note = func(string) {}
	}
	c, err := debuginfod.FromEnv()
	if err != nil {
		note(err.Error() + "; no debug file is fetched")
		return
	}
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.MaxTime)
	defer cancel()
	wanted, fetched, errs := mods.FetchDebug(ctx, c.Fetch, func(err error) bool { return errors.Is(err, debuginfod.ErrNotFound) })
	if wanted == 0 {
		return
	}
	msg := fmt.Sprintf("debuginfod: %d of %d modules without debug info here got a debug file from %s (cache %s)", fetched, wanted, strings.Join(c.URLs, " "), c.Cache)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg += fmt.Sprintf("; stopped after %v (DEBUGINFOD_MAXTIME)", c.MaxTime)
	}
	note(msg)
	for i, err := range errs {
		if i == 3 {
			note(fmt.Sprintf("debuginfod: %d more failures", len(errs)-i))
			break
		}
		note(err.Error())
	}
}
