package inspect

import (
	"context"
	"time"

	"github.com/arenactl/arenactl/internal/perfschema"
	"github.com/arenactl/arenactl/internal/report"
)

// AddServerMemory reads the database server's own memory accounting
// (--mysql) into rep, after the process was read and let go: a server that
// does not answer costs the report that line only, said in ServerErr.
func AddServerMemory(ctx context.Context, rep *report.Report, cfg *perfschema.Config, timeout time.Duration) {
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	m, err := perfschema.Read(ctx, cfg, rep.Pid, timeout)
	if err != nil {
		rep.ServerErr = err.Error()
		return
	}
	rep.Server = m
}
