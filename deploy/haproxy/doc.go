// Package haproxy holds no code: its directory ships an HAProxy
// configuration for one failoverd group (haproxy.cfg: a writer frontend
// following the primary and a reader frontend over fit replicas, both from
// the sites' sidecar health checks). Its tests check the file with
// Debian's haproxy (`haproxy -c`, installed by scripts/deps) and that its
// checks ask what README.md says; test/e2e runs it in front of real sites.
package haproxy
