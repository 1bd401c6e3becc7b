package configs

import (
	"strings"
	"testing"
)

// TestTwoSitesOnOneServerAreRefused guards against a site counted twice:
// two sites (of one group, or of two groups) whose mysql.address names one
// server are an error at the later site, naming the earlier one; localhost
// is 127.0.0.1, host names compare without case, and another port is
// another server.
func TestTwoSitesOnOneServerAreRefused(t *testing.T) {
	second := `  - name: billing
    credentials:
      admin: {user: failoverd, passwordFile: admin.pw}
      replication: {user: repl, passwordFile: repl.pw}
    sites:
      - name: a
        mysql: {address: ADDR}
      - name: b
        mysql: {address: db-b:3306}
`
	cases := []struct {
		name, east, west, billing string
		problem                   string // path of the refused site; "" for none
		prev                      string
	}{
		{"same group", "db-east:3306", "db-east:3306", "db-a:3306", "groups[0].sites[1].mysql.address", "groups[0].sites[0].mysql.address"},
		{"host case", "DB-East:3306", "db-east:3306", "db-a:3306", "groups[0].sites[1].mysql.address", "groups[0].sites[0].mysql.address"},
		{"localhost is 127.0.0.1", "localhost:3306", "127.0.0.1:3306", "db-a:3306", "groups[0].sites[1].mysql.address", "groups[0].sites[0].mysql.address"},
		{"another group", "db-east:3306", "db-west:3306", "db-west:3306", "groups[1].sites[0].mysql.address", "groups[0].sites[1].mysql.address"},
		{"another port", "127.0.0.1:3306", "127.0.0.1:3307", "localhost:3308", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			y := strings.Replace(validYAML, "address: db-east:3306", "address: "+c.east, 1)
			y = strings.Replace(y, "address: db-west:3306", "address: "+c.west, 1)
			y += strings.Replace(second, "ADDR", c.billing, 1)
			if c.problem == "" {
				if _, err := Parse(y, secrets(t)); err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			list := problemsOf(t, y)
			findProblem(t, list, c.problem, "is the server of "+c.prev, "give each site its server's address")
			if len(list) != 1 {
				t.Errorf("%d problems, want 1:\n%v", len(list), (&Problems{List: list}).Error())
			}
		})
	}
}
