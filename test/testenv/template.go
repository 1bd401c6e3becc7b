package testenv

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/failoverd/failoverd/deploy/accounts"
)

// accountSQL creates the accounts and the app schema on engine e: the
// harness's own administrator and the application account, then
// failoverd's accounts (DaemonUser, ReplUser) from deploy/accounts' SQL for
// the engine, exactly as documented for users. It runs once per template
// through the unix socket as root; every instance copies the result. The
// template is built without a binlog, so no instance starts with GTIDs.
func accountSQL(e Engine) ([]string, error) {
	s := []string{"CREATE DATABASE `" + AppDatabase + "`"}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		s = append(s,
			fmt.Sprintf("CREATE USER %s@%s IDENTIFIED BY %s", sqlQuote(AdminUser), sqlQuote(host), sqlQuote(AdminPassword)),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO %s@%s WITH GRANT OPTION", sqlQuote(AdminUser), sqlQuote(host)),
			fmt.Sprintf("CREATE USER %s@%s IDENTIFIED BY %s", sqlQuote(AppUser), sqlQuote(host), sqlQuote(AppPassword)),
			fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON `%s`.* TO %s@%s", AppDatabase, sqlQuote(AppUser), sqlQuote(host)),
		)
	}
	documented, err := accounts.Statements(string(e), accounts.Passwords{Daemon: DaemonPassword, Sidecar: SidecarPassword, Replication: ReplPassword})
	if err != nil {
		return nil, err
	}
	return append(s, documented...), nil
}

// templateFormat changes whenever the template's content changes in a way
// the key below cannot see.
const templateFormat = "4"

// templateSpec says how one engine's template datadir is made: initialise
// an empty datadir, start the server on a socket only without a binlog, run
// accountSQL as root through the socket, shut it down cleanly.
type templateSpec struct {
	engine Engine
	dir    string // CacheDir() subdirectory holding this engine's templates
	// marker is a path inside a finished datadir (a half-built one lacks it).
	marker string
	// version identifies the server binary (part of the cache key).
	version func() (string, error)
	// initialize fills the empty datadir data; it logs to logPath.
	initialize func(data, logPath string) (*process, error)
	// serve starts the server on data, listening on socket only.
	serve func(data, run, socket, errLog string) (*process, error)
	// keyArgs are the flags that shape the datadir (part of the cache key).
	keyArgs []string
	// drop are files an instance must not inherit (MySQL's auto.cnf holds
	// the server_uuid, which must differ on every instance).
	drop []string
	// sql creates the accounts (accountSQL).
	sql []string
}

type templateResult struct {
	once sync.Once
	dir  string
	err  error
}

var templates = map[Engine]*templateResult{MariaDB: {}, MySQL: {}}

// CacheDir is where scripts/deps puts binaries and the MySQL root, and where
// testenv keeps its template datadirs: $FAILOVERD_CACHE, else
// $HOME/.cache/failoverd.
func CacheDir() string {
	if d := os.Getenv("FAILOVERD_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "failoverd-cache")
	}
	return filepath.Join(home, ".cache", "failoverd")
}

// template returns a cleanly shut down datadir of spec's engine holding the
// accounts, building it on first use. It lives in CacheDir keyed by the
// server version, the account SQL and the datadir-shaping flags, so a
// machine builds it once (MariaDB ~5 s, MySQL ~10 s).
func template(spec func() (templateSpec, error), e Engine) (string, error) {
	r := templates[e]
	r.once.Do(func() {
		sp, err := spec()
		if err != nil {
			r.err = fmt.Errorf("build %s template: %w", e, err)
			return
		}
		r.dir, r.err = buildTemplate(sp)
	})
	return r.dir, r.err
}

// mariadbTemplate is the MariaDB template datadir.
func mariadbTemplate() (string, error) { return template(mariadbTemplateSpec, MariaDB) }

func mariadbTemplateSpec() (templateSpec, error) {
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := exec.LookPath(bin); err != nil {
			return templateSpec{}, fmt.Errorf("%s not found (%v): run scripts/deps", bin, err)
		}
	}
	sql, err := accountSQL(MariaDB)
	if err != nil {
		return templateSpec{}, err
	}
	return templateSpec{
		sql:    sql,
		engine: MariaDB,
		dir:    "mariadb-template",
		marker: "mysql",
		version: func() (string, error) {
			v, err := exec.Command("mariadbd", "--version").Output()
			if err != nil {
				return "", fmt.Errorf("mariadbd --version: %w", err)
			}
			return string(v), nil
		},
		initialize: func(data, logPath string) (*process, error) {
			return startProcess("mariadb-install-db", logPath, "mariadb-install-db",
				append(mariadbBaseArgs(data), "--auth-root-authentication-method=normal", "--skip-test-db")...)
		},
		serve: func(data, run, socket, errLog string) (*process, error) {
			return startProcess("mariadbd (template)", filepath.Join(run, "mariadbd.out"), "mariadbd",
				append(mariadbBaseArgs(data), "--skip-networking", "--skip-log-bin", "--read-only=ON",
					"--socket="+socket, "--pid-file="+filepath.Join(run, "pid"), "--log-error="+errLog)...)
		},
		keyArgs: mariadbBaseArgs(""),
		drop:    []string{"mysql_upgrade_info", "ib_buffer_pool"},
	}, nil
}

func buildTemplate(spec templateSpec) (string, error) {
	version, err := spec.version()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s", version, templateFormat, strings.Join(spec.sql, ";"), strings.Join(spec.keyArgs, " "))
	final := filepath.Join(CacheDir(), spec.dir, hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(final, spec.marker)); err == nil {
		return final, nil
	}
	what := "build " + string(spec.engine) + " template"
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	removeAbandonedBuilds(filepath.Dir(final))
	work, err := os.MkdirTemp(filepath.Dir(final), "tmp-")
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer os.RemoveAll(work)
	run, err := newRunDir() // short path for the socket
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	var started []*process
	defer func() {
		for _, p := range started {
			if p.cleanup() != nil {
				return // keeps the children record of a survivor for scripts/leftovers
			}
		}
		_ = removeDir(run)
	}()

	data := filepath.Join(work, "data")
	initLog := filepath.Join(run, "initialize.log")
	p, err := spec.initialize(data, initLog)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	started = append(started, p)
	if !p.wait(5 * time.Minute) {
		_ = p.cleanup()
		return "", fmt.Errorf("%s: initialize timed out\n%s", what, tailFile(initLog, 20))
	}
	if err := p.exitError(); err != nil {
		return "", fmt.Errorf("%s: initialize: %v\n%s", what, err, tailFile(initLog, 20))
	}

	socket := filepath.Join(run, "mysqld.sock")
	errLog := filepath.Join(run, "server.err")
	srv, err := spec.serve(data, run, socket, errLog)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	started = append(started, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := waitSocketReady(ctx, srv, socket); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", what, err, tailFile(errLog, 20))
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", socket
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	for _, q := range spec.sql {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %s: %w", what, q, err)
		}
	}
	_ = db.Close()
	if err := srv.terminate(2 * time.Minute); err != nil {
		return "", fmt.Errorf("%s: shutdown: %w", what, err)
	}
	// Leftovers of the bootstrap server that an instance must not inherit.
	for _, f := range spec.drop {
		_ = os.Remove(filepath.Join(data, f))
	}
	// Atomic publish: a concurrent test binary may have won the race; both
	// results are equivalent.
	if err := os.Rename(data, final); err != nil {
		if _, statErr := os.Stat(filepath.Join(final, spec.marker)); statErr == nil {
			return final, nil
		}
		return "", fmt.Errorf("%s: publish: %w", what, err)
	}
	return final, nil
}

// removeAbandonedBuilds removes template builds a killed process left
// behind; a live build takes seconds, so an hour-old one is abandoned.
func removeAbandonedBuilds(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && strings.HasPrefix(e.Name(), "tmp-") && time.Since(info.ModTime()) > time.Hour {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// copyTree copies the regular files and directories of src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o660)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
