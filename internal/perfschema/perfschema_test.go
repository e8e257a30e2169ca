package perfschema

import "testing"

// --mysql takes a socket path (root over it, the server checked by its
// peer credentials) or a DSN; anything else is refused before a
// connection is tried.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, socket, net, user string
		ok                    bool
	}{
		{"/run/mysqld/mysqld.sock", "/run/mysqld/mysqld.sock", "unix", "root", true},
		{"monitor:secret@unix(/tmp/m.sock)/", "/tmp/m.sock", "unix", "monitor", true},
		{"monitor:secret@tcp(127.0.0.1:3306)/", "", "tcp", "monitor", true},
		{"not a dsn", "", "", "", false},
		{"user@bogus(x", "", "", "", false},
	} {
		cfg, err := Parse(c.in)
		if (err == nil) != c.ok {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if err == nil && (cfg.Socket != c.socket || cfg.c.Net != c.net || cfg.c.User != c.user) {
			t.Errorf("%q: socket %q, net %q, user %q", c.in, cfg.Socket, cfg.c.Net, cfg.c.User)
		}
	}
}
