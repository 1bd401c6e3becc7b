package mysqlctl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/failoverd/failoverd/gtid"
	"github.com/go-sql-driver/mysql"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{"repl", "'repl'", false},
		{"", "''", false},
		{"it's", "'it''s'", false},
		{`back\slash`, `'back\slash'`, false}, // NO_BACKSLASH_ESCAPES: literal backslash
		{"'; DROP TABLE x; --", "'''; DROP TABLE x; --'", false},
		{"a\x00b", "", true},
		{"\xff\xfe", "", true},
	}
	for _, tt := range tests {
		got, err := quote(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("quote(%q) = %q, %v; want ErrInvalidArgument", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("quote(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	const pw = "s3cret-pw"
	serverEcho := &mysql.MySQLError{Number: 1064, Message: "You have an error in your SQL syntax near '" + pw + "', SOURCE_AUTO_POSITION'"}
	tests := []struct {
		name      string
		err       error
		secrets   []string
		redacted  bool
		keepsWrap bool
	}{
		{"no secret inside: unchanged", &mysql.MySQLError{Number: 1227, Message: "Access denied"}, []string{pw}, false, true},
		{"server echo", serverEcho, []string{pw}, true, false},
		{"wrapped echo", fmt.Errorf("change source: %w", serverEcho), []string{"", pw}, true, false},
		{"empty secret ignored", errors.New("boom"), []string{""}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redact(tt.err, tt.secrets...)
			if strings.Contains(got.Error(), pw) {
				t.Fatalf("redacted error still holds the password: %v", got)
			}
			if tt.redacted != strings.Contains(got.Error(), "<redacted>") {
				t.Fatalf("redact(%v) = %v; redacted want %t", tt.err, got, tt.redacted)
			}
			if tt.keepsWrap != (got == tt.err) {
				t.Fatalf("redact returned %v (same=%t), want same=%t", got, got == tt.err, tt.keepsWrap)
			}
			if errNumber(got) != errNumber(tt.err) {
				t.Fatalf("error number lost: %d != %d", errNumber(got), errNumber(tt.err))
			}
		})
	}
}

// TestPasswordsNeverInErrors runs every operation that sends a password
// against a server that echoes the statement in its error.
func TestPasswordsNeverInErrors(t *testing.T) {
	const ownPW, srcPW, donorPW = "own-pw-1", "src-pw-2", "donor-pw-3"
	echo := func(prefix string) func(db *fakeDB) {
		return func(db *fakeDB) {
			db.before = func(stmt string) {
				if strings.HasPrefix(stmt, prefix) {
					db.rules = append([]*fakeRule{{prefix: prefix, responses: []fakeResponse{fails(&mysql.MySQLError{Number: 1064, Message: "syntax error near '" + stmt + "' and " + ownPW})}}}, db.rules...)
				}
			}
		}
	}
	for _, tc := range []struct {
		name   string
		flavor Flavor
		setup  func(db *fakeDB)
		run    func(i *Instance) error
	}{
		{"mysql replicate", mysql80, echo("CHANGE"), func(i *Instance) error {
			return i.ReplicateFrom(context.Background(), Source{Host: "h", User: "repl", Password: srcPW})
		}},
		{"mariadb replicate", mariadb, echo("CHANGE"), func(i *Instance) error {
			return i.ReplicateFrom(context.Background(), Source{Host: "h", User: "repl", Password: srcPW})
		}},
		{"mysql clone", mysql80, echo("CLONE"), func(i *Instance) error {
			return i.CloneFrom(context.Background(), Donor{Host: "h", User: "clone", Password: donorPW}, time.Hour)
		}},
		{"own password in a fence error", mariadb, echo("SET GLOBAL"), func(i *Instance) error {
			return i.Fence(context.Background())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, db, _ := newFake(tc.flavor)
			inst.secret = ownPW
			db.on(mysqlReadOnly, mysqlFenced).on(mariaReadOnly, mariaFenced)
			tc.setup(db)
			err := tc.run(inst)
			if err == nil {
				t.Fatal("expected the echoed error")
			}
			for _, pw := range []string{ownPW, srcPW, donorPW} {
				if strings.Contains(err.Error(), pw) {
					t.Fatalf("error leaks a password: %v", err)
				}
			}
		})
	}
}

func TestOpenErrorsHideThePassword(t *testing.T) {
	const pw = "open-secret-pw"
	// Port 1 on 127.0.0.1: nothing listens, the dial fails at once.
	_, err := Open(context.Background(), Options{Addr: "127.0.0.1:1", User: "failoverd", Password: pw})
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("Open error = %v; want an error without the password", err)
	}
	for _, opts := range []Options{
		{User: "u", Password: pw},
		{Addr: "127.0.0.1:1", Password: pw},
		{Addr: "127.0.0.1:1", User: "u", Password: pw, ReadTimeout: 1},
	} {
		if _, err := Open(context.Background(), opts); !errors.Is(err, ErrInvalidArgument) || strings.Contains(err.Error(), pw) {
			t.Errorf("Open(%+v) = %v; want ErrInvalidArgument without the password", opts, err)
		}
	}
}

// The driver writes the host into a TLS config's ServerName, on its own copy:
// callers (the poller, the daemon) share one config between sites and rely
// on that, or one site's name would be checked on every other site.
func TestOpenDoesNotModifyTheCallersTLSConfig(t *testing.T) {
	shared := &tls.Config{MinVersion: tls.VersionTLS12}
	_, _ = Open(context.Background(), Options{Addr: "127.0.0.1:1", User: "u", Password: "p", TLS: shared})
	if shared.ServerName != "" {
		t.Fatalf("Open set ServerName %q on the caller's TLS config", shared.ServerName)
	}
}

func TestIsClientConnection(t *testing.T) {
	own := &connIDs{}
	own.add(42)
	tests := []struct {
		p    processEntry
		want bool
	}{
		{processEntry{42, "failoverd", "Sleep"}, false},      // our pool
		{processEntry{42, "app", "Sleep"}, true},             // id reused after a restart
		{processEntry{43, "failoverd", "Sleep"}, true},       // same account, not our pool
		{processEntry{1, "system user", "Connect"}, false},   // MySQL replication applier
		{processEntry{2, "system user", "Slave_IO"}, false},  // MariaDB IO thread
		{processEntry{3, "repl", "Binlog Dump GTID"}, false}, // a replica's dump thread
		{processEntry{4, "repl", "Binlog Dump"}, false},
		{processEntry{5, "event_scheduler", "Daemon"}, false},
		{processEntry{6, "root", "Daemon"}, false},
		{processEntry{7, "app", "Killed"}, false},
		{processEntry{8, "app", "Query"}, true},
		{processEntry{9, "unauthenticated user", "Connect"}, true},
	}
	for _, tt := range tests {
		if got := isClientConnection(tt.p, own, "failoverd"); got != tt.want {
			t.Errorf("isClientConnection(%+v) = %t, want %t", tt.p, got, tt.want)
		}
	}
}

func TestMariaDBWaitPosition(t *testing.T) {
	tests := []struct{ set, want string }{
		{"", ""},
		{"0-1-17", "0-1-17"},
		{"0-1-50,0-2-100", "0-2-100"},
		{"0-2-100,0-1-150", "0-1-150"},
		{"1-3-4,0-1-9,0-2-3", "0-1-9,1-3-4"},
		{"0-1-4,0-1-10..20", "0-1-20"}, // a set with a gap: the top counts
	}
	for _, tt := range tests {
		if got := mariadbWaitPosition(gtid.MustParse(gtid.MariaDB, tt.set)); got != tt.want {
			t.Errorf("mariadbWaitPosition(%q) = %q, want %q", tt.set, got, tt.want)
		}
	}
}

func TestThreadStateRunning(t *testing.T) {
	for s, want := range map[ThreadState]bool{ThreadYes: true, ThreadConnecting: true, "Preparing": true, ThreadNo: false, "": false} {
		if s.Running() != want {
			t.Errorf("%q.Running() = %t, want %t", s, !want, want)
		}
	}
}
