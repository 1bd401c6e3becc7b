package sim

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeSecret()
	os.Exit(code)
}
