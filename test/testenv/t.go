package testenv

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
