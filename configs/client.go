package configs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// LoadDaemonSection reads only what a client of the daemon needs from the
// configuration file at path: its daemon section (listen address, API token
// file, TLS files), with the FAILOVERD_DAEMON_* environment overrides and
// the defaults applied and relative paths resolved against the file's
// directory, as Load does. The rest of the file is not validated and no
// secret is read: an operator's `failoverd status -c FILE` must work where
// the MySQL password files are not readable, or while a group being edited
// is still invalid. Problems in the daemon section are a *Problems error.
func LoadDaemonSection(path string) (Daemon, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Daemon{}, fmt.Errorf("read config: %w", err)
	}
	root, problems := document(data, path)
	if problems != nil {
		return Daemon{}, problems
	}
	d := newDecoder(path, os.LookupEnv)
	cfg := &Config{src: d.src}
	d.decodeStruct(root, reflect.ValueOf(cfg).Elem(), "")
	cfg.resolvePaths(filepath.Dir(path))
	out := &Problems{}
	for _, p := range d.problems {
		// Only the daemon section is used: problems elsewhere are validate's.
		if p.Path == "daemon" || strings.HasPrefix(p.Path, "daemon.") {
			out.List = append(out.List, p)
		}
	}
	out.sort()
	if err := out.err(); err != nil {
		return Daemon{}, err
	}
	return cfg.Daemon, nil
}
