package poller

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/failoverd/failoverd/configs"
	"github.com/failoverd/failoverd/mysqlctl"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// group returns a valid configs.Group with its admin password file.
func group(t *testing.T) configs.Group {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "admin.pw")
	writeFile(t, pw, "s3cret\n")
	return configs.Group{
		Name: "g", Engine: configs.EngineMariaDB,
		PollInterval: 500 * time.Millisecond, ProbeTimeout: 400 * time.Millisecond, FailureThreshold: 2, RecoveryThreshold: 3,
		Credentials: configs.Credentials{Admin: configs.Account{User: "failoverd", PasswordFile: pw}},
		Sites: []configs.Site{
			{Name: "a", MySQL: configs.MySQLEndpoint{Address: "proxy:1", ReplicationAddress: "db-a:3306"}},
			{Name: "b", MySQL: configs.MySQLEndpoint{Address: "db-b:3306"}},
		},
	}
}

func TestNewFromGroup(t *testing.T) {
	g := group(t)
	p, err := NewFromGroup(g, GroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config()
	if c.Group != "g" || c.PollInterval != g.PollInterval || c.ProbeTimeout != g.ProbeTimeout || c.FailureThreshold != 2 || c.MaxBackoff != 2*time.Second {
		t.Errorf("config from group: %+v", c)
	}
	want := []Site{{Name: "a", Addr: "proxy:1", ReplicationAddr: "db-a:3306"}, {Name: "b", Addr: "db-b:3306"}}
	if got := p.Sites(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("sites = %+v, want %+v", got, want)
	}
	if p.book.lookup("db-a", 3306) != "a" {
		t.Errorf("replication address of a not mapped")
	}

	noPw := group(t)
	noPw.Credentials.Admin.PasswordFile = filepath.Join(t.TempDir(), "missing")
	if _, err := NewFromGroup(noPw, GroupOptions{}); err == nil {
		t.Errorf("missing password file: no error")
	}
	badTLS := group(t)
	badTLS.TLS = configs.TLS{Enabled: true, CAFile: filepath.Join(t.TempDir(), "missing")}
	if _, err := NewFromGroup(badTLS, GroupOptions{}); err == nil {
		t.Errorf("unreadable CA file: no error")
	}
	slow := group(t)
	slow.ProbeTimeout = slow.PollInterval
	if _, err := NewFromGroup(slow, GroupOptions{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("probe timeout = poll interval: err = %v, want ErrInvalidConfig", err)
	}
}

// TestMySQLDialerRefused dials a closed port on 127.0.0.1: the password is
// read at each dial and the failure classifies as refused.
func TestMySQLDialerRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more

	reads := 0
	dial := MySQLDialer(mysqlctl.Options{User: "failoverd"}, func() (string, error) { reads++; return "pw", nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 2 {
		pr, err := dial(ctx, Site{Name: "a", Addr: addr})
		if pr != nil || Classify(err) != ClassRefused {
			t.Errorf("dial closed port: %v, %v (class %q), want refused", pr, err, Classify(err))
		}
	}
	if reads != 2 {
		t.Errorf("password read %d times for 2 dials", reads)
	}
	failing := MySQLDialer(mysqlctl.Options{User: "failoverd"}, func() (string, error) { return "", os.ErrNotExist })
	if _, err := failing(ctx, Site{Name: "a", Addr: addr}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unreadable password: err = %v", err)
	}
}
