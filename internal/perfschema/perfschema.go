// Package perfschema reads a MySQL or MariaDB server's own accounting of
// its memory (performance_schema's memory instruments), to be placed beside
// malloc's figures in the RSS waterfall: what the server says it uses, and
// so what it does not account for. One connection, two reads of
// performance_schema's tables, nothing written.
package perfschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/report"
)

// MaxEvents is how many of the largest memory events are kept.
const MaxEvents = 10

// maxRows bounds the rows read: a server has a few hundred memory
// instruments; a table that says more is not read further.
const maxRows = 10000

// Config is where the server is: a socket path (as root, with no
// password: MariaDB's unix_socket authentication is not spoken by the
// driver, so root needs another method or a DSN with a user), or a
// go-sql-driver DSN (user:password@unix(/path)/ or user:password@tcp(host:port)/).
type Config struct {
	c *mysql.Config
	// Socket is the socket path when one was given: the server's process
	// is then checked to be the one inspected (SO_PEERCRED).
	Socket string
}

// Parse reads --mysql's argument.
func Parse(s string) (*Config, error) {
	if strings.HasPrefix(s, "/") {
		c := mysql.NewConfig()
		c.Net, c.Addr, c.User = "unix", s, "root"
		return &Config{c: c, Socket: s}, nil
	}
	c, err := mysql.ParseDSN(s)
	if err != nil {
		return nil, fmt.Errorf("--mysql %q is neither a socket path nor a DSN such as user:password@unix(/run/mysqld/mysqld.sock)/: %w", s, err)
	}
	if c.Net == "unix" {
		return &Config{c: c, Socket: c.Addr}, nil
	}
	return &Config{c: c}, nil
}

// Error is a failure to read the server's accounting.
type Error struct {
	Source string
	Err    error
}

func (e *Error) Error() string { return "performance_schema at " + e.Source + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Read reads the server's memory accounting. With a socket, the process
// that listens on it must be pid: the figures of another server would be
// set beside this one's malloc.
func Read(ctx context.Context, cfg *Config, pid int, timeout time.Duration) (*report.ServerMemory, error) {
	c := cfg.c.Clone()
	c.Timeout, c.ReadTimeout, c.WriteTimeout = timeout, timeout, timeout
	src := c.Addr
	fail := func(err error) (*report.ServerMemory, error) { return nil, &Error{Source: src, Err: err} }
	if cfg.Socket != "" {
		peer, err := peerPid(cfg.Socket, timeout)
		if err != nil {
			return fail(err)
		}
		if peer != pid {
			return fail(fmt.Errorf("the socket is served by process %d, not %d", peer, pid))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return fail(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxOpenConns(1)
	var on int
	if err := db.QueryRowContext(ctx, "SELECT @@performance_schema").Scan(&on); err != nil {
		return fail(err)
	}
	if on == 0 {
		return fail(errors.New("performance_schema is off: start the server with performance_schema=ON (and its memory instruments on: performance-schema-instrument='memory/%=ON')"))
	}
	rows, err := db.QueryContext(ctx, "SELECT EVENT_NAME, CURRENT_NUMBER_OF_BYTES_USED FROM performance_schema.memory_summary_global_by_event_name "+
		"WHERE CURRENT_NUMBER_OF_BYTES_USED > 0 ORDER BY CURRENT_NUMBER_OF_BYTES_USED DESC")
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	m := &report.ServerMemory{Source: src}
	for n := 0; rows.Next() && n < maxRows; n++ {
		var name string
		var bytes int64
		if err := rows.Scan(&name, &bytes); err != nil {
			return fail(err)
		}
		m.Total += uint64(bytes)
		m.Instruments++
		if len(m.Events) < MaxEvents {
			m.Events = append(m.Events, report.ServerMemoryEvent{Name: name, Bytes: uint64(bytes)})
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if m.Instruments == 0 {
		return fail(errors.New("no memory instrument counts anything: turn them on (performance-schema-instrument='memory/%=ON' at start)"))
	}
	return m, nil
}

// peerPid is the process that accepted a connection on the socket.
func peerPid(path string, timeout time.Duration) (int, error) {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return int(cred.Pid), nil
}
