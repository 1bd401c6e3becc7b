package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// MySQL runs from a private root that scripts/deps builds with debootstrap
// (Debian unstable's mysql-server-core 9.7; the host's libc is too old for
// it). mysqld runs on the host through that root's own dynamic loader:
//
//	ROOT/…/ld-linux-x86-64.so.2 --library-path ROOT/usr/lib/x86_64-linux-gnu:ROOT/lib/x86_64-linux-gnu ROOT/usr/sbin/mysqld --no-defaults …
//
// so its pid, signals (SIGKILL, SIGSTOP), datadir, socket and port are
// ordinary host ones. The loader is started through a symlink named mysqld,
// so /proc/PID/comm says "mysqld" and a sidecar (which only signals a
// process named mysqld or mariadbd) treats it as the real thing.

// MySQLRoot is the root scripts/deps builds: CacheDir()/mysql-root.
func MySQLRoot() string { return filepath.Join(CacheDir(), "mysql-root") }

// mysqlRootMarker is written by scripts/deps when the root is complete.
const mysqlRootMarker = ".failoverd-root-ok"

var (
	launcherOnce sync.Once
	launcherPath string
	launcherErr  error
)

// mysqldLauncher returns the path of a symlink named mysqld pointing at the
// root's loader, creating it on first use. Run it with mysqldArgs.
func mysqldLauncher() (string, error) {
	launcherOnce.Do(func() { launcherPath, launcherErr = makeLauncher() })
	return launcherPath, launcherErr
}

func makeLauncher() (string, error) {
	root := MySQLRoot()
	if _, err := os.Stat(filepath.Join(root, mysqlRootMarker)); err != nil {
		return "", fmt.Errorf("MySQL root %s is missing or incomplete (%v): run scripts/deps", root, err)
	}
	// The root's own symlinks are relative, so they resolve inside it.
	loader, err := filepath.EvalSymlinks(filepath.Join(root, "lib64", "ld-linux-x86-64.so.2"))
	if err != nil {
		return "", fmt.Errorf("MySQL root %s has no loader (%v): run scripts/deps", root, err)
	}
	if !strings.HasPrefix(loader, root+string(filepath.Separator)) {
		return "", fmt.Errorf("MySQL root's loader resolves outside the root (%s): run scripts/deps", loader)
	}
	dir := filepath.Join(root, "failoverd-bin")
	link := filepath.Join(dir, "mysqld")
	if cur, err := os.Readlink(link); err == nil && cur == loader {
		return link, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("MySQL launcher: %w", err)
	}
	tmp := fmt.Sprintf("%s.%d", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(loader, tmp); err != nil {
		return "", fmt.Errorf("MySQL launcher: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		return "", fmt.Errorf("MySQL launcher: %w", err)
	}
	return link, nil
}

// mysqldArgs are the loader's arguments that run the root's mysqld; the
// mysqld flags follow (--no-defaults first).
func mysqldArgs() []string {
	root := MySQLRoot()
	return []string{
		"--library-path", filepath.Join(root, "usr/lib/x86_64-linux-gnu") + ":" + filepath.Join(root, "lib/x86_64-linux-gnu"),
		filepath.Join(root, "usr/sbin/mysqld"),
	}
}

// mysqlBaseArgs are the loader and mysqld flags shared by the template build
// and every instance. --no-defaults must be mysqld's first flag.
func mysqlBaseArgs(datadir string) []string {
	root := MySQLRoot()
	a := append(mysqldArgs(),
		"--no-defaults",
		"--datadir="+datadir,
		"--basedir="+filepath.Join(root, "usr"),
		"--lc-messages-dir="+filepath.Join(root, "usr/share/mysql"),
		"--plugin-dir="+filepath.Join(root, "usr/lib/mysql/plugin"),
		"--secure-file-priv=",
		"--innodb-buffer-pool-size=32M",
		"--innodb-redo-log-capacity=16M",
		"--skip-name-resolve",
		"--mysqlx=OFF",
	)
	if os.Geteuid() == 0 {
		a = append(a, "--user=root")
	}
	return a
}

// mysqlPlugins are loaded on every instance: semi-sync (both sides, so any
// site can be source or replica) and clone (reclone).
var mysqlPlugins = []string{"semisync_source.so", "semisync_replica.so", "mysql_clone.so"}

// mysqlInstanceArgs are MySQL's replication flags for one instance.
func mysqlInstanceArgs(semiSync bool) []string {
	a := []string{
		"--gtid-mode=ON",
		"--enforce-gtid-consistency=ON",
		"--log-replica-updates=ON",
		// A restarted replica waits for the code under test, as production
		// sites are configured (docs/design.md, "Start read-only").
		"--skip-replica-start=ON",
		"--replica-net-timeout=3",
		"--performance-schema=ON", // mysqlctl reads semi-sync state from it
	}
	for _, p := range mysqlPlugins {
		a = append(a, "--plugin-load-add="+p)
	}
	if semiSync {
		a = append(a, "--rpl-semi-sync-source-enabled=ON", "--rpl-semi-sync-replica-enabled=ON")
	}
	return a
}

// mysqlTemplate is the MySQL template datadir.
func mysqlTemplate() (string, error) { return template(mysqlTemplateSpec, MySQL) }

func mysqlTemplateSpec() (templateSpec, error) {
	launcher, err := mysqldLauncher()
	if err != nil {
		return templateSpec{}, err
	}
	sql, err := accountSQL(MySQL)
	if err != nil {
		return templateSpec{}, err
	}
	return templateSpec{
		sql:    sql,
		engine: MySQL,
		dir:    "mysql-template",
		marker: "mysql.ibd",
		version: func() (string, error) {
			v, err := exec.Command(launcher, append(mysqldArgs(), "--no-defaults", "--version")...).Output()
			if err != nil {
				return "", fmt.Errorf("mysqld --version through the MySQL root's loader: %w", err)
			}
			return string(v), nil
		},
		initialize: func(data, logPath string) (*process, error) {
			return startProcess("mysqld --initialize-insecure", logPath, launcher,
				append(mysqlBaseArgs(data), "--initialize-insecure", "--log-error="+logPath)...)
		},
		serve: func(data, run, socket, errLog string) (*process, error) {
			return startProcess("mysqld (template)", filepath.Join(run, "mysqld.out"), launcher,
				append(mysqlBaseArgs(data), "--skip-networking", "--disable-log-bin", "--read-only=ON",
					"--socket="+socket, "--pid-file="+filepath.Join(run, "pid"), "--log-error="+errLog)...)
		},
		keyArgs: mysqlBaseArgs(""),
		// auto.cnf holds server_uuid: every instance must make its own, or
		// replicas would refuse a source with their own uuid.
		drop: []string{"auto.cnf", "ib_buffer_pool"},
	}, nil
}
