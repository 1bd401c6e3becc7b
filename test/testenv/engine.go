package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Engine names the database server a test runs against. Every real-server
// test runs on both engines unless its name says why it cannot.
type Engine string

const (
	// MariaDB is MariaDB 10.11 from Debian's packages (mariadbd on $PATH).
	MariaDB Engine = "mariadb"
	// MySQL is Oracle MySQL 9.7 from Debian unstable's packages, run from the
	// private root scripts/deps builds (MySQLRoot).
	MySQL Engine = "mysql"
)

// EngineEnv selects the engines: "mariadb", "mysql" or "both" (the default).
const EngineEnv = "FAILOVERD_TEST_ENGINE"

// AllEngines lists every engine, in the order ForEachEngine runs them.
var AllEngines = []Engine{MariaDB, MySQL}

// Engines returns the engines FAILOVERD_TEST_ENGINE selects.
func Engines() ([]Engine, error) {
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(EngineEnv))); v {
	case "", "both":
		return AllEngines, nil
	case string(MariaDB):
		return []Engine{MariaDB}, nil
	case string(MySQL):
		return []Engine{MySQL}, nil
	default:
		return nil, fmt.Errorf("%s=%q: want mariadb, mysql or both", EngineEnv, v)
	}
}

// ForEachEngine runs f as one subtest per selected engine, named after it
// (TestX/mariadb, TestX/mysql), one after the other.
func ForEachEngine(t *testing.T, f func(t *testing.T, e Engine)) {
	t.Helper()
	skipIfShort(t)
	engines, err := Engines()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for _, e := range engines {
		t.Run(string(e), func(t *testing.T) { f(t, e) })
	}
}

// ForEachEngineB is ForEachEngine for benchmarks (BenchmarkX/mariadb, ...).
func ForEachEngineB(b *testing.B, f func(b *testing.B, e Engine)) {
	b.Helper()
	engines, err := Engines()
	if err != nil {
		b.Fatalf("testenv: %v", err)
	}
	for _, e := range engines {
		b.Run(string(e), func(b *testing.B) { f(b, e) })
	}
}

// String returns the engine's name.
func (e Engine) String() string { return string(e) }

// Valid reports whether e is a known engine.
func (e Engine) Valid() bool { return e == MariaDB || e == MySQL }
