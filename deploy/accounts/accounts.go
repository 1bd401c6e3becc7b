// Package accounts holds the SQL that creates failoverd's database accounts
// with the least privileges they need, per engine: mysql.sql and
// mariadb.sql, to copy and paste (docs/accounts.md explains them). The same
// text is what the tests run: the real-server test of this package performs
// every operation of the daemon with exactly these grants, and test/testenv
// creates these accounts on every site, so the e2e suite's daemons and
// replicas use them.
package accounts

import (
	"embed"
	"errors"
	"fmt"
	"strings"
)

//go:embed mysql.sql mariadb.sql
var files embed.FS

// The account names the SQL creates.
const (
	DaemonUser      = "failoverd"
	SidecarUser     = "failoverd_sidecar"
	ReplicationUser = "repl"
)

// The placeholder passwords the SQL carries, replaced by Statements.
const (
	daemonPlaceholder      = "CHANGE-ME-daemon"
	sidecarPlaceholder     = "CHANGE-ME-sidecar"
	replicationPlaceholder = "CHANGE-ME-replication"
)

// ErrUnknownEngine is returned for an engine other than "mysql" or "mariadb".
var ErrUnknownEngine = errors.New("accounts: unknown engine")

// Passwords replace the CHANGE-ME placeholders.
type Passwords struct {
	Daemon, Sidecar, Replication string
}

// SQL returns the engine's file as written ("mysql" or "mariadb", as in a
// group's engine setting).
func SQL(engine string) (string, error) {
	switch engine {
	case "mysql", "mariadb":
	default:
		return "", fmt.Errorf("%w %q: want mysql or mariadb", ErrUnknownEngine, engine)
	}
	b, err := files.ReadFile(engine + ".sql")
	if err != nil {
		return "", fmt.Errorf("accounts: read %s.sql: %w", engine, err)
	}
	return string(b), nil
}

// Statements returns the engine's SQL as single statements (comments
// dropped, no trailing semicolon) with the placeholders replaced by pw. A
// password must not contain a single quote or a backslash (it is pasted
// into a string literal).
func Statements(engine string, pw Passwords) ([]string, error) {
	text, err := SQL(engine)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{pw.Daemon, pw.Sidecar, pw.Replication} {
		if p == "" || strings.ContainsAny(p, `'\`) {
			return nil, fmt.Errorf("accounts: a password is empty or holds a quote or backslash")
		}
	}
	var code strings.Builder
	for line := range strings.Lines(text) {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
			code.WriteString(line)
		}
	}
	r := strings.NewReplacer("'"+daemonPlaceholder+"'", "'"+pw.Daemon+"'", "'"+sidecarPlaceholder+"'", "'"+pw.Sidecar+"'",
		"'"+replicationPlaceholder+"'", "'"+pw.Replication+"'")
	var out []string
	for _, s := range strings.Split(r.Replace(code.String()), ";") {
		if s = strings.Join(strings.Fields(s), " "); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}
