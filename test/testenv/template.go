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
)

// accountSQL creates the accounts and the app schema. It runs once per
// template through the unix socket as root; every instance copies the result.
// The template is built without a binlog, so no instance starts with GTIDs.
var accountSQL = func() []string {
	var s []string
	for _, host := range []string{"127.0.0.1", "localhost"} {
		s = append(s,
			fmt.Sprintf("CREATE USER %s@%s IDENTIFIED BY %s", sqlQuote(AdminUser), sqlQuote(host), sqlQuote(AdminPassword)),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO %s@%s WITH GRANT OPTION", sqlQuote(AdminUser), sqlQuote(host)),
			fmt.Sprintf("CREATE USER %s@%s IDENTIFIED BY %s", sqlQuote(ReplUser), sqlQuote(host), sqlQuote(ReplPassword)),
			fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO %s@%s", sqlQuote(ReplUser), sqlQuote(host)),
			fmt.Sprintf("CREATE USER %s@%s IDENTIFIED BY %s", sqlQuote(AppUser), sqlQuote(host), sqlQuote(AppPassword)),
			fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON `%s`.* TO %s@%s", AppDatabase, sqlQuote(AppUser), sqlQuote(host)),
		)
	}
	return append([]string{"CREATE DATABASE `" + AppDatabase + "`"}, s...)
}()

// templateFormat changes whenever the template's content changes in a way
// the key below cannot see.
const templateFormat = "2"

var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
)

// CacheDir is where scripts/deps puts binaries and testenv keeps its MariaDB
// template: $FAILOVERD_CACHE, else $HOME/.cache/failoverd.
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

// mariadbTemplate returns a cleanly shut down datadir holding the accounts,
// building it on first use. It lives in CacheDir keyed by the mariadbd
// version and the account SQL, so a machine builds it once (~5 s).
func mariadbTemplate() (string, error) {
	templateOnce.Do(func() { templateDir, templateErr = buildMariaDBTemplate() })
	return templateDir, templateErr
}

func buildMariaDBTemplate() (string, error) {
	if _, err := exec.LookPath("mariadbd"); err != nil {
		return "", fmt.Errorf("mariadbd not found (%v): run scripts/deps", err)
	}
	if _, err := exec.LookPath("mariadb-install-db"); err != nil {
		return "", fmt.Errorf("mariadb-install-db not found (%v): run scripts/deps", err)
	}
	version, err := exec.Command("mariadbd", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("mariadbd --version: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s", version, templateFormat, strings.Join(accountSQL, ";"), strings.Join(mariadbBaseArgs(""), " "))
	final := filepath.Join(CacheDir(), "mariadb-template", hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(final, "mysql")); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("build mariadb template: %w", err)
	}
	removeAbandonedBuilds(filepath.Dir(final))
	work, err := os.MkdirTemp(filepath.Dir(final), "tmp-")
	if err != nil {
		return "", fmt.Errorf("build mariadb template: %w", err)
	}
	defer os.RemoveAll(work)
	run, err := newRunDir() // short path for the socket
	if err != nil {
		return "", fmt.Errorf("build mariadb template: %w", err)
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
	installLog := filepath.Join(run, "install.log")
	p, err := startProcess("mariadb-install-db", installLog, "mariadb-install-db",
		append(mariadbBaseArgs(data), "--auth-root-authentication-method=normal", "--skip-test-db")...)
	if err != nil {
		return "", fmt.Errorf("build mariadb template: %w", err)
	}
	started = append(started, p)
	if !p.wait(5 * time.Minute) {
		_ = p.cleanup()
		return "", fmt.Errorf("build mariadb template: mariadb-install-db timed out\n%s", tailFile(installLog, 20))
	}
	if err := p.exitError(); err != nil {
		return "", fmt.Errorf("build mariadb template: mariadb-install-db: %v\n%s", err, tailFile(installLog, 20))
	}

	socket := filepath.Join(run, "mysqld.sock")
	errLog := filepath.Join(run, "mariadbd.err")
	srv, err := startProcess("mariadbd (template)", filepath.Join(run, "mariadbd.out"), "mariadbd",
		append(mariadbBaseArgs(data), "--skip-networking", "--skip-log-bin", "--read-only=ON",
			"--socket="+socket, "--pid-file="+filepath.Join(run, "pid"), "--log-error="+errLog)...)
	if err != nil {
		return "", fmt.Errorf("build mariadb template: %w", err)
	}
	started = append(started, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := waitSocketReady(ctx, srv, socket); err != nil {
		return "", fmt.Errorf("build mariadb template: %w\n%s", err, tailFile(errLog, 20))
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", socket
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return "", fmt.Errorf("build mariadb template: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	for _, q := range accountSQL {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("build mariadb template: %s: %w", q, err)
		}
	}
	_ = db.Close()
	if err := srv.terminate(2 * time.Minute); err != nil {
		return "", fmt.Errorf("build mariadb template: shutdown: %w", err)
	}
	// Leftovers of the bootstrap server that an instance must not inherit.
	for _, f := range []string{"mysql_upgrade_info", "ib_buffer_pool"} {
		_ = os.Remove(filepath.Join(data, f))
	}
	// Atomic publish: a concurrent test binary may have won the race; both
	// results are equivalent.
	if err := os.Rename(data, final); err != nil {
		if _, statErr := os.Stat(filepath.Join(final, "mysql")); statErr == nil {
			return final, nil
		}
		return "", fmt.Errorf("build mariadb template: publish: %w", err)
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
