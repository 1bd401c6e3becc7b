package haproxy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/failoverd/failoverd/test/testenv"
)

// TestShippedConfigIsAcceptedByHAProxy guards against shipping a file the
// packaged haproxy refuses: `haproxy -c -f haproxy.cfg` must pass (haproxy
// comes from scripts/deps, so a missing one fails, never skips).
func TestShippedConfigIsAcceptedByHAProxy(t *testing.T) {
	if _, err := testenv.HAProxyBinary(); err != nil && testing.Short() {
		t.Skipf("%v (-short: scripts/deps not run)", err)
	}
	if err := testenv.CheckHAProxyConfig("haproxy.cfg"); err != nil {
		t.Fatal(err)
	}
}

// TestShippedConfigChecksTheSidecarsHealthEndpoints guards the routing
// contract the README and docs/routing.md describe: the writer backend
// admits only role=primary sites and closes sessions of a site marked
// down (clients must not keep writing into a deposed primary); the reader
// backend admits only role=replica within a maxLag and closes its sessions
// too (no client keeps reading from a replica that fell behind); every
// server is checked.
func TestShippedConfigChecksTheSidecarsHealthEndpoints(t *testing.T) {
	b, err := os.ReadFile("haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var name string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line != "" && line[0] != ' ' && line[0] != '#' {
			name = strings.TrimSpace(line)
		}
		sections[name] += line + "\n"
	}
	for _, c := range []struct{ backend, check string }{
		{"backend mysql_writer", "option httpchk GET /health?role=primary\n"},
		{"backend mysql_readers", "option httpchk GET /health?role=replica&maxLag="},
	} {
		s, ok := sections[c.backend]
		if !ok {
			t.Fatalf("no %q section", c.backend)
		}
		if !strings.Contains(s, c.check) {
			t.Errorf("%s does not check %q", c.backend, c.check)
		}
		if !strings.Contains(s, "http-check expect status 200") {
			t.Errorf("%s does not expect status 200", c.backend)
		}
		if !regexp.MustCompile(`(?m)^\s+default-server .*on-marked-down shutdown-sessions`).MatchString(s) {
			t.Errorf("%s: default-server lacks on-marked-down shutdown-sessions", c.backend)
		}
		servers := regexp.MustCompile(`(?m)^\s+server \S+ \S+(.*)$`).FindAllStringSubmatch(s, -1)
		if len(servers) == 0 {
			t.Errorf("%s has no server", c.backend)
		}
		for _, m := range servers {
			if !strings.Contains(m[1], " check") {
				t.Errorf("%s: server without check: %q", c.backend, m[0])
			}
		}
	}
	for _, fe := range []string{"frontend mysql_writer", "frontend mysql_readers"} {
		if !strings.Contains(sections[fe], "default_backend mysql_") {
			t.Errorf("%s has no default_backend", fe)
		}
	}
}
