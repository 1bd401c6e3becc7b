package testenv

import "testing"

// T is the subset of testing.TB testenv needs; *testing.T, *testing.B and the
// playground's own runner satisfy it.
type T interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Name() string
}

// skipIfShort skips t when the tests run with -short (`make test-short`):
// everything that starts a real server, etcd, kube-apiserver, Redis or
// HAProxy is left to `make test`. A T that cannot skip (the playground's
// runner) is never in a -short test run.
func skipIfShort(t T) {
	s, ok := t.(interface{ Skip(args ...any) })
	if ok && testing.Short() {
		s.Skip("testenv: real components are not started with -short (make test runs them)")
	}
}
