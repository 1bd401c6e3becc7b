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

	engines, err := Engines()
	if err != nil {
		t.Fatal(err)
	}
	var servers []*Server
	for _, e := range engines {
		arm()
		s := time.Now()
		servers = append(servers, StartServer(t, ServerOptions{Engine: e, Name: "raced"}))
		t.Logf("%s %v", e, time.Since(s))
	}
	s := time.Now()
	arm()
	r := StartRedis(t, RedisOptions{Name: "raced"})
	t.Logf("redis %v", time.Since(s))
	if raced != len(engines)+1 {
		t.Fatalf("the taken port was handed out %d times, want %d", raced, len(engines)+1)
	}
	if r.Port == taken {
		t.Fatalf("redis claims the taken port %d", taken)
	}
	for _, m := range servers {
		if m.Port == taken {
			t.Fatalf("%s claims the taken port %d", m.Engine, taken)
		}
		if got := m.QueryString(t, "SELECT @@port"); got != itoa(m.Port) {
			t.Fatalf("%s @@port = %s, want %d", m.Engine, got, m.Port)
		}
	}
}

func itoa(i int) string { return strconvI(i) }
