package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// suiteT is the T of servers shared by several tests of this package. It
// shows that testenv works with any runner, not only *testing.T: TestMain
// runs its cleanups after every test finished.
type suiteT struct {
	mu       sync.Mutex
	cleanups []func()
}

func (s *suiteT) Helper()      {}
func (s *suiteT) Name() string { return "testenv-suite" }
func (s *suiteT) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}
func (s *suiteT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (s *suiteT) Logf(format string, args ...any)   { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (s *suiteT) TempDir() string {
	d, err := os.MkdirTemp("", "testenv-suite-")
	if err != nil {
		s.Fatalf("suite temp dir: %v", err)
	}
	s.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (s *suiteT) runCleanups() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

var suite = &suiteT{}

// shared holds the lazily started servers tests may share: they only read
// from them or undo what they change.
var shared struct {
	dbOnce sync.Once
	db     *Server
	dbErr  error
}

// sharedMariaDB returns a standalone MariaDB shared by the tests that only
// connect to it (through proxies, with the accounts).
func sharedMariaDB(t *testing.T) *Server {
	t.Helper()
	skipIfShort(t)
	shared.dbOnce.Do(func() { shared.db, shared.dbErr = startServer(suite, ServerOptions{Engine: MariaDB, Name: "shared"}) })
	if shared.dbErr != nil {
		t.Fatalf("shared mariadb: %v", shared.dbErr)
	}
	return shared.db
}

func TestMain(m *testing.M) {
	code := m.Run()
	suite.runCleanups()
	// Guards the package's promise: after the suite, no server it started
	// is left (zombies excluded: they hold no port and no file).
	if left := liveChildren(os.Getpid()); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testenv: processes left after the suite: %s\n", strings.Join(left, ", "))
		code = 1
	}
	os.Exit(code)
}

// liveChildren lists the live direct children of pid as "pid:comm".
func liveChildren(pid int) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cpid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(pid) {
			continue
		}
		out = append(out, fmt.Sprintf("%d:%s", cpid, s[strings.IndexByte(s, '(')+1:i]))
	}
	return out
}
