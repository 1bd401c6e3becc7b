package testenv

import (
	"net"
	"testing"
	"time"
)

// TestStartRetriesAfterPortRace hands every starter a port that is already
// taken first: the start must notice the bind failure and retry elsewhere.
func TestStartRetriesAfterPortRace(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	orig := pickPort
	t.Cleanup(func() { pickPort = orig })
	raced := 0
	arm := func() {
		first := true
		pickPort = func() (int, error) {
			if first {
				first = false
				raced++
				return taken, nil
			}
			return orig()
		}
	}

	arm()
	s := time.Now()
	m := StartMariaDB(t, ServerOptions{Name: "raced"})
	t.Logf("mariadb %v", time.Since(s))
	s = time.Now()
	arm()
	r := StartRedis(t, RedisOptions{Name: "raced"})
	t.Logf("redis %v", time.Since(s))
	if raced != 2 {
		t.Fatalf("the taken port was handed out %d times, want 2", raced)
	}
	for name, port := range map[string]int{"mariadb": m.Port, "redis": r.Port} {
		if port == taken {
			t.Fatalf("%s claims the taken port %d", name, port)
		}
	}
	if got := m.QueryString(t, "SELECT @@port"); got != itoa(m.Port) {
		t.Fatalf("mariadb @@port = %s, want %d", got, m.Port)
	}
}

func itoa(i int) string { return strconvI(i) }
